"""The executed mutants: their names (one list, one spelling) and what each computes
instead of the declared program. A testing aid: a mutant executable completes its
communication but computes other words, so that a comparison with the oracle must catch
it. The planner builds them (`alphac.plan.mutants`), the oracle evaluates them
(`alphac.oracle.combine`); docs/oracle.md defines each precisely.
"""

from __future__ import annotations

MUTANTS: dict[str, str] = {
    "swap-branch": "the root's right subtree trades places with the right subtree of the "
                   "root's left branch: ((A + B) + C) becomes ((A + C) + B)",
    "duplicate-mass": "the first leaf (in leaf order) with samples reports its sample count "
                      "twice, its sum unchanged",
    "unweighted-mean": "every leaf with samples contributes its own mean (sum / its count) "
                       "with count 1",
    "deliver-to-next": "the combine result meant for owner t (the sums at t's coordinates) "
                       "is delivered to owner (t + 1) mod n",
    "stale-replica": "partitioned parameters: an owner keeps the read replica of its first "
                     "update, so the next contribution reads the replica of the previous "
                     "version (refused data-parallel-replica-version)",
    "foreign-inputs": "independent-state learners: owner o applies its rule to the input "
                      "pairs of owner (o + 1) mod n instead of its own",
}

NAMES: tuple[str, ...] = tuple(MUTANTS)


def check_name(name: str | None) -> None:
    """ValueError unless `name` is None (the declared program) or one of NAMES."""
    if name is not None and name not in MUTANTS:
        raise ValueError(f"mutant must be one of {', '.join(NAMES)}, not {name!r}")
