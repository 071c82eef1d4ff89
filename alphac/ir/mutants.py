"""The executed mutants: their names (one list, one spelling) and what each computes
instead of the declared program. A testing aid: a mutant executable completes its
communication but computes other words, so that a comparison with the oracle must catch
it. The planner builds them (`alphac.plan.mutants`), the oracle evaluates them
(`alphac.oracle.combine`); docs/oracle.md defines each precisely.
"""

from __future__ import annotations

from dataclasses import replace

from alphac.ir import nodes as ir

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
    "foreign-accumulator": "coordinate-owned learners (one accumulator per coordinate): each "
                           "coordinate's parameter is updated with the accumulator of the next "
                           "coordinate, as its owner holds it at the start of the update",
    "fresher-read": "fixed staleness S >= 1: the contributions to update u read version "
                    "max(u - S + 1, 0), one newer than declared (the executables of staleness S - 1)",
    "fewer-local-steps": "local steps H >= 2: each owner applies H - 1 updates on its own samples "
                         "between combines, one fewer than declared (the executables of H - 1 local steps)",
    "looser-bound": "bounded staleness S: the contributions run up to S + 1 updates ahead and may read "
                    "version u - S - 1 (the executables of bound S + 1; such a read refuses "
                    "data-parallel-stale-read)",
}

NAMES: tuple[str, ...] = tuple(MUTANTS)


def check_name(name: str | None) -> None:
    """ValueError unless `name` is None (the declared program) or one of NAMES."""
    if name is not None and name not in MUTANTS:
        raise ValueError(f"mutant must be one of {', '.join(NAMES)}, not {name!r}")


def foreign_accumulator(dep: ir.Deployment) -> ir.Deployment | str:
    """The deployment mutant foreign-accumulator runs, or why it does not apply.

    The learner has one accumulator per coordinate (m = k, state word i is coordinate i's)
    and a per-slot update that owns its state. The mutant's update runs every parameter's
    statement first, each reading the accumulator of coordinate (i + 1) mod k in place of
    coordinate i's, then the accumulators' statements as declared: so a parameter reads the
    other coordinate's accumulator as it was when the update started. To read it, each
    owner holds every accumulator: the optimizer state is replicated (a read-only mirror of
    the others' words, assembled by selection after each update)."""
    L, part = dep.learner, dep.partitioning
    if L.independent or L.m != L.k or L.k < 2 or not part.optimizer_state.sharded \
            or part.words_per_coordinate != 1:
        return "it needs a coordinate-owned learner: one partitioned accumulator per coordinate"
    if any(not isinstance(s, ir.Assign) or not s.target.constant for s in L.update.body):
        return "it rewrites a per-slot update of assignments; this update has loops or lets"
    k = L.k
    params, state = [], []
    for s in L.update.body:
        if isinstance(s, ir.Assign) and s.target.base < k:
            params.append(replace(s, value=_next_accumulator(s.value, k)))
        else:
            state.append(s)
    update = replace(L.update, body=tuple(params + state))
    return replace(dep, learner=replace(L, update=update),
                   partitioning=replace(part, optimizer_state=ir.Replicate()))


def fresher_read(dep: ir.Deployment) -> ir.Deployment | str:
    """The deployment mutant fresher-read runs, or why it does not apply: staleness S - 1 in
    place of the declared S (S - 1 = 0: the synchronous learner)."""
    S = dep.consistency.staleness
    if S == 0:
        return "it needs a fixed staleness S >= 1"
    kind = ir.ConsistencyKind.FIXED_STALENESS if S > 1 else ir.ConsistencyKind.SYNCHRONOUS
    return replace(dep, consistency=replace(dep.consistency, kind=kind, value=S - 1))


def fewer_local_steps(dep: ir.Deployment) -> ir.Deployment | str:
    """The deployment mutant fewer-local-steps runs, or why it does not apply: H - 1 local
    steps in place of the declared H >= 2."""
    H = dep.consistency.local_steps
    if H < 2:
        return "it needs local steps H >= 2"
    return replace(dep, consistency=replace(dep.consistency, value=H - 1))


def looser_bound(dep: ir.Deployment) -> ir.Deployment | str:
    """The deployment mutant looser-bound runs, or why it does not apply: bound S + 1 in
    place of the declared bounded staleness S."""
    S = dep.consistency.bound
    if S == 0:
        return "it needs a bounded staleness"
    return replace(dep, consistency=replace(dep.consistency, value=S + 1))


# The mutants whose executables run another deployment: the rewrite, or why it does not apply.
REWRITES = {"foreign-accumulator": foreign_accumulator, "fresher-read": fresher_read,
            "fewer-local-steps": fewer_local_steps, "looser-bound": looser_bound}


def _next_accumulator(e, k: int):
    """`e` reading accumulator (i + 1) mod k wherever it reads accumulator i (slot k + i)."""
    if isinstance(e, ir.SlotRef) and e.index.constant and k <= e.index.base < 2 * k:
        return replace(e, index=ir.Index(k + (e.index.base - k + 1) % k))
    if isinstance(e, ir.Unary):
        return replace(e, arg=_next_accumulator(e.arg, k))
    if isinstance(e, (ir.Binary, ir.Compare)):
        return replace(e, lhs=_next_accumulator(e.lhs, k), rhs=_next_accumulator(e.rhs, k))
    if isinstance(e, ir.Select):
        return replace(e, cond=_next_accumulator(e.cond, k), then=_next_accumulator(e.then, k),
                       other=_next_accumulator(e.other, k))
    if isinstance(e, ir.Sum):
        return replace(e, body=_next_accumulator(e.body, k))
    return e
