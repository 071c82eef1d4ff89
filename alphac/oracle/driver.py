"""`evaluate(deployment)`: the declared updates, one after another, in binary64.

Per update: every owner sums its per-sample contributions in sample order (from +0.0);
the combine tree adds (Σg, n) pairs left then right (under the sample tree, the samples'
contributions are the leaves, `sampletree.py`); the mean is Σg / Σn; the update
program maps (parameters, state, mean, rate) to the next parameters and state. Owners
with no samples contribute (+0.0, 0). The result lists every owner's words for the
deployment's layout.

Three engines run the programs: `scalar` (Python floats, one slot at a time), `vector`
(numpy over loop ranges and batches of samples) and `numba` (each program lowered to a
function numba compiles without fast-math, alphac/oracle/compiled.py). They give the same
words and name the same refusals; `auto` picks the scalar engine for small learners, the
vector one for mid-sized runs and numba for large ones, where its compilation pays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphac.ir.mutants import check_name, foreign_accumulator
from alphac.ir.nodes import ConsistencyKind, Deployment, Learner, SampleTree, TreeBranch, TreeNode
from alphac.ir.words import to_float
from alphac.oracle import independent, sampletree, scalar, vector
from alphac.oracle.combine import Mass, _same, combine, deliver_to_next, mean, mutate_leaves, swap_branch
from alphac.oracle.localsteps import owner_sums, round_of as local_round
from alphac.oracle.layout import owned_coordinates, param_coordinates, state_offsets
from alphac.oracle.refusal import Refusal, Site
from alphac.oracle.schedule import check_schedule, scheduled_sums, versions_before
from alphac.oracle.tree import combine_tree, leaves as tree_leaves
from alphac.oracle.words import (bits_of, digest, floats, narrow32, storage_count, storage_floats,
                                 storage_words)

ENGINES = ("auto", "scalar", "vector", "numba")
FORMATS = ("binary64", "binary32")  # storage formats (docs/oracle.md, "binary32 learners")
SCALAR_LIMIT = 50_000   # slot-words per update up to which `auto` walks with Python floats
NUMBA_LIMIT = 50_000_000  # slot-words of all updates from which `auto` compiles with numba
CHUNK_WORDS = 1 << 24   # slot-words per batch of samples on the vector engine


@dataclass(frozen=True)
class OwnerResult:
    owner: int
    role: str
    target: str
    version: int
    params: tuple[int, ...]  # the parameter words this owner holds
    state: tuple[int, ...]  # the state words this owner holds
    digest: str  # sha256 hex of the little-endian params words, then state words


@dataclass(frozen=True)
class OracleResult:
    deployment: str
    rounds: int  # the updates evaluated
    params: tuple[int, ...]  # the logical parameter words (all k), as stored (binary32: packed)
    state: tuple[int, ...]  # the logical state words (all m), as stored (local steps: owner 0's;
                            # each owner's own is its OwnerResult's)
    owners: tuple[OwnerResult, ...]
    version: int = 0  # the final version: the start's version + rounds
    start: int = 0  # the version evaluated from (a checkpoint's; 0 from the initial words)
    storage: str = "binary64"  # the words' format: binary32 packs two values a word


# ----------------------------------------------------------------------------- inputs

def _validate(dep: Deployment) -> None:
    L = dep.learner
    prof = dep.contract.profile
    if (prof.rounding, prof.exceptional) != ("nearest-even", "finite-or-refuse") or (
            prof.subnormals != "preserve" or prof.format not in FORMATS):
        raise Refusal("oracle-profile",
                      f"the contract's profile ({prof.format}, {prof.rounding}, subnormals "
                      f"{prof.subnormals}, {prof.exceptional}) is not a binary64 or binary32 "
                      "nearest-even finite-or-refuse profile the oracle evaluates")
    if dep.consistency.bound and (L.independent or isinstance(dep.topology, SampleTree)):
        raise Refusal("oracle-consistency", f"deployment {dep.name} declares staleness bounded by "
                      f"{dep.consistency.value}; the oracle evaluates it for data-parallel learners on trees "
                      "over owners")
    if dep.consistency.local_steps and (L.independent or isinstance(dep.topology, SampleTree)):
        raise Refusal("oracle-consistency", f"deployment {dep.name} declares {dep.consistency.value} local "
                      "steps; the oracle evaluates them for data-parallel learners on trees over owners")
    if prof.format == "binary32" and L.independent:
        raise Refusal("oracle-profile", "binary32 storage is evaluated for data-parallel "
                      "learners only (the planner refuses the others)")
    problems = []
    if len(L.samples.shares) != dep.owners:
        problems.append(f"samples are listed for {len(L.samples.shares)} owners, "
                        f"the deployment has {dep.owners}")
    if L.samples.width != L.s:
        problems.append(f"samples have width {L.samples.width}, the learner says {L.s}")
    if len(L.initial) != L.k or len(L.initial_state) != L.m:
        problems.append(f"{len(L.initial)} initial parameters and {len(L.initial_state)} "
                        f"state words for k = {L.k}, m = {L.m}")
    if L.independent:
        problems += independent.problems(dep)
    elif L.contribution.slots != 2 * L.k + L.s or L.update.slots != 2 * L.k + L.m + 1:
        problems.append(f"programs over {L.contribution.slots} and {L.update.slots} slots "
                        f"for k = {L.k}, s = {L.s}, m = {L.m}")
    if len(dep.placement) != dep.owners:
        problems.append(f"{len(dep.placement)} placements for {dep.owners} owners")
    if problems:
        raise Refusal("oracle-inconsistent", "; ".join(problems))


def _choose(engine: str, L: Learner, rounds: int, fmt: str = "binary64") -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    elementary = uses_elementary(L)
    if engine == "numba" and fmt != "binary64":
        raise ValueError("the numba engine sums in binary64 only, not a binary32 learner's "
                         "binary32 combine: use --engine vector or scalar")
    if engine == "numba" and elementary:
        # numba's math is libm's, not the real function rounded once
        raise ValueError("the numba engine has no elementary functions (exp, log, ...): "
                         "use --engine vector or scalar")
    if engine != "auto":
        return engine
    work = (sum(L.samples.shares) + 1) * (2 * L.k + L.s + L.m + 1)
    if work <= SCALAR_LIMIT:
        return "scalar"
    numba_ok = not elementary and fmt == "binary64"
    return "numba" if work * rounds >= NUMBA_LIMIT and numba_ok else "vector"


def uses_elementary(L: Learner) -> bool:
    """Whether a program of the learner calls an elementary function (exp, log, ...)."""
    from alphac.ir.nodes import ELEMENTARY_OPS, Unary, statements, subexpressions

    return any(isinstance(e, Unary) and e.op in ELEMENTARY_OPS
               for p in (L.contribution, L.update) for st in statements(p.body)
               for e in subexpressions(st.value))


# ----------------------------------------------------------------------------- engines

def _owner_of_rows(shares: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """For each sample row: its owner and its position within that owner's share."""
    owner = np.repeat(np.arange(len(shares)), shares)
    starts = np.concatenate([[0], np.cumsum(shares)[:-1]]).astype(np.int64)
    return owner, np.arange(owner.size) - starts[owner]


def _scalar_contributions(L: Learner, params: np.ndarray, rows: np.ndarray, first: int,
                          owner: np.ndarray, pos: np.ndarray, u: int):
    """(site, contribution) of rows[i] (global row first+i), in order: the contribution
    program on [params, sample, +0.0 ...]."""
    p = params.tolist()
    zeros = [0.0] * L.k
    for i, row in enumerate(rows):
        site = Site(u, "contribution", owner=int(owner[first + i]), sample=int(pos[first + i]))
        yield site, scalar.run_program(L.contribution, p + row.tolist() + zeros, site)[L.k + L.s:]


def _scalar_rows(L: Learner, params: np.ndarray, rows: np.ndarray, first: int,
                 owner: np.ndarray, pos: np.ndarray, accs: dict[int, list[float]], u: int,
                 narrow=None):
    """Contributions of rows[i] (global row first+i), added to their owners' sums in order."""
    one = None if narrow is None else (lambda x: float(narrow(x)))
    for site, contribution in _scalar_contributions(L, params, rows, first, owner, pos, u):
        scalar.accumulate(accs[site.owner], contribution, site, one)


def _contributions_scalar(L: Learner, params: np.ndarray, samples: np.ndarray,
                          u: int, narrow=None) -> list[np.ndarray]:
    owner, pos = _owner_of_rows(L.samples.shares)
    accs = {o: [0.0] * L.k for o in range(len(L.samples.shares))}
    _scalar_rows(L, params, samples, 0, owner, pos, accs, u, narrow)
    return [np.array(accs[o], dtype=np.float64) for o in sorted(accs)]


def _unconfirmed(u: int, r0: int, r1: int) -> AssertionError:
    """The scalar engine must refuse what the vector one flagged."""
    return AssertionError(f"update {u}: the vector engine flagged samples {r0}..{r1} "
                          "but the scalar engine found every value finite")


def _chunk_rows(L: Learner) -> int:
    """Samples per batch of the vector engine."""
    return max(1, CHUNK_WORDS // max(1, 2 * L.k + L.s))


def _vector_contributions(L: Learner, params: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The contributions of `rows` as a (k, rows) array, one column per sample; raises
    vector.Flagged when any value is non-finite."""
    k, s = L.k, L.s
    store = vector.SlotStore([
        (0, params.reshape(k, 1)),
        (k, rows.T),  # a view: sample j is column j
        (k + s, np.zeros((k, rows.shape[0]))),
    ])
    vector.run_program(L.contribution, store)
    contrib = store.rows(k + s, 2 * k + s)
    if not np.isfinite(contrib).all():
        raise vector.Flagged()
    return contrib


def _contributions_vector(L: Learner, params: np.ndarray, samples: np.ndarray,
                          u: int, narrow=None) -> list[np.ndarray]:
    k = L.k
    owner, pos = _owner_of_rows(L.samples.shares)
    accs = {o: np.zeros(k) for o in range(len(L.samples.shares))}
    total = samples.shape[0]
    chunk = _chunk_rows(L)
    for r0 in range(0, total, chunk):
        r1 = min(total, r0 + chunk)
        rows = samples[r0:r1]
        before = dict(accs)
        try:
            contrib = _vector_contributions(L, params, rows)
            with np.errstate(all="ignore"):
                for col in range(r1 - r0):  # sample order: one element-wise add per sample
                    o = int(owner[r0 + col])
                    acc = accs[o] + contrib[:, col]
                    if narrow is not None:
                        acc = narrow(acc)
                    if not np.isfinite(acc).all():
                        raise vector.Flagged()
                    accs[o] = acc
        except vector.Flagged:
            slow = {o: a.tolist() for o, a in before.items()}
            _scalar_rows(L, params, rows, r0, owner, pos, slow, u, narrow)
            raise _unconfirmed(u, r0, r1) from None
    return [accs[o] for o in sorted(accs)]


def _contributions_numba(L: Learner, params: np.ndarray, samples: np.ndarray,
                         u: int, narrow=None) -> list[np.ndarray]:
    assert narrow is None, "the numba engine is not chosen for a binary32 learner"
    from alphac.oracle import compiled

    owner, pos = _owner_of_rows(L.samples.shares)
    return compiled.contributions(L, params, samples, owner, pos, u)


def _update_numba(L: Learner, params, state, m_, rate: float, u: int):
    from alphac.oracle import compiled

    return compiled.update(L, params, state, m_, rate, u)


def _sample_runs(L: Learner, params: np.ndarray, samples: np.ndarray, u: int, kind: str):
    """(r0, contributions as rows) for the sample tree's aligned runs of P samples, in order;
    the scalar engine names the first non-finite contribution of a run the vector engine
    flags (the vector engine also stands for the numba one here)."""
    owner, pos = _owner_of_rows(L.samples.shares)
    total = samples.shape[0]
    run = sampletree.run_length(_chunk_rows(L))
    for r0 in range(0, total, run):
        rows = samples[r0:min(total, r0 + run)]
        if kind == "scalar":
            yield r0, np.array([c for _, c in _scalar_contributions(L, params, rows, r0, owner, pos, u)])
            continue
        try:
            yield r0, _vector_contributions(L, params, rows).T
        except vector.Flagged:
            list(_scalar_contributions(L, params, rows, r0, owner, pos, u))  # names the refusal
            raise _unconfirmed(u, r0, r0 + len(rows)) from None


def _sample_tree_mean(L: Learner, params: np.ndarray, samples: np.ndarray, u: int, kind: str,
                      narrow=_same):
    owner, _ = _owner_of_rows(L.samples.shares)
    runs = _sample_runs(L, params, samples, u, kind)
    return mean(sampletree.total(runs, L.k, owner, u, narrow), u, narrow)


def _update_scalar(L: Learner, params, state, m_, rate: float, u: int):
    slots = params.tolist() + state.tolist() + m_.tolist() + [rate]
    scalar.run_program(L.update, slots, Site(u, "update"))
    out = np.array(slots[:L.k + L.m], dtype=np.float64)
    return out[:L.k], out[L.k:]


def _update_vector(L: Learner, params, state, m_, rate: float, u: int):
    data = np.concatenate([params, state, m_, [rate]]).reshape(-1, 1)
    try:
        store = vector.run_program(L.update, vector.SlotStore([(0, data)]))
    except vector.Flagged:
        _update_scalar(L, params, state, m_, rate, u)
        raise AssertionError(f"update {u}: the vector engine flagged the update program "
                             "but the scalar engine found every value finite") from None
    out = store.rows(0, L.k + L.m)[:, 0].copy()
    return out[:L.k], out[L.k:]


_ENGINES = {"scalar": (_contributions_scalar, _update_scalar),
            "vector": (_contributions_vector, _update_vector),
            "numba": (_contributions_numba, _update_numba)}


# ----------------------------------------------------------------------------- driver

def evaluate(dep: Deployment, rounds: int | None = None, start=None, *, mutant: str | None = None,
             engine: str = "auto", tick=None, schedule=None) -> OracleResult:
    """Run `rounds` updates of `dep` and report every owner's words. From the initial words
    by default; from `start` = (parameter words, state words, version u) — a checkpoint's
    (`alphac.oracle.resume.start_of`) — updates u, u+1, ...: by default up to the
    deployment's update count. `mutant` evaluates one of `alphac.ir.mutants.NAMES` instead
    of the declared program (docs/oracle.md): ValueError for another name; a mutant that
    does not apply to `dep` refuses `mutant-not-applicable`. `tick(u)`, if given, hears each
    update u as it is done (a launcher shows how far the oracle is). Under bounded staleness
    `schedule[o][i]` is the version owner o's contributions to update first + i read, as
    the run recorded it (`alphac.oracle.schedule`)."""
    check_name(mutant)
    by_samples = isinstance(dep.topology, SampleTree)
    if not by_samples:  # on the sample tree every mutant refuses below, by one message
        dep = _mutant_deployment(dep, mutant)
    _validate(dep)
    if not by_samples:
        independent.check_mutant(dep, mutant)
    L = dep.learner
    fmt = dep.contract.profile.format
    first = 0
    if start is not None:
        start_params, start_state, first = start
        first = int(first)
        if first < 0:
            raise ValueError(f"the start version must be >= 0, not {first}")
        want = (storage_count(L.k, fmt), storage_count(L.m, fmt))
        if (len(start_params), len(start_state)) != want:
            raise Refusal("checkpoint-learner-mismatch",
                          f"the checkpoint holds {len(start_params)} parameter and {len(start_state)} "
                          f"state words; the learner has k = {L.k} and m = {L.m} in {fmt} "
                          f"({want[0]} and {want[1]} words)")
    rounds = max(0, dep.updates - first) if rounds is None else rounds
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, not {rounds}")
    kind = _choose(engine, L, rounds, fmt)
    narrow = narrow32 if fmt == "binary32" else None
    contributions, update = _ENGINES[kind]
    if by_samples and mutant is not None:
        raise Refusal("mutant-not-applicable", f"mutant {mutant} is defined on trees over owners, "
                      "not on the sample tree")
    if not by_samples:
        root = combine_tree(dep.owners, dep.topology)
        order = tree_leaves(root)
        if sorted(order) != list(range(dep.owners)):
            raise Refusal("oracle-inconsistent",
                          f"the combine tree's leaves {order} do not cover owners 0..{dep.owners - 1} "
                          "exactly once")
        root = _mutant_tree(dep, root, mutant)

    if start is None:
        params = floats(L.initial.as_array())
        state = floats(L.initial_state.as_array())
    else:
        params = storage_floats(start_params, L.k, fmt)
        state = storage_floats(start_state, L.m, fmt)
    if L.independent:  # no combine, no mean: each owner's rule on its own inputs
        params = independent.evolve(dep, params, first, rounds, mutant, tick)
        return _result(dep, rounds, bits_of(params), bits_of(state), first)
    same = _same if narrow is None else narrow
    rate = to_float(int(L.rate))
    samples = np.asarray(L.samples.words, dtype=np.uint64).reshape(
        sum(L.samples.shares), L.s).view(np.float64)
    shares = L.samples.shares
    stale = dep.consistency.staleness
    if mutant == "fresher-read":  # read one version newer than declared
        if stale == 0:
            raise Refusal("mutant-not-applicable", f"mutant {mutant}: it needs a fixed staleness S >= 1")
        stale -= 1
    H = dep.consistency.local_steps
    if mutant == "fewer-local-steps":  # one local step fewer per round than declared
        if H < 2:
            raise Refusal("mutant-not-applicable", f"mutant {mutant}: it needs local steps H >= 2")
        H -= 1
    bound = dep.consistency.bound
    if mutant == "looser-bound":  # the executables of bound S + 1, replayed under it
        if bound == 0:
            raise Refusal("mutant-not-applicable", f"mutant {mutant}: it needs a bounded staleness")
        bound += 1
    if bound and not by_samples:
        schedule = check_schedule(schedule, dep.owners, first, rounds, bound)
    # what a checkpoint holds besides the words, read when its contract is continued. Fixed
    # staleness: version v's parameters, kept while a contribution reads them (from a
    # checkpoint, the S versions before it: its history region, else the start's words)
    kept = start if start is not None and (dep.resume is None or dep.resume.mode == "same") else None
    versions = {} if not (stale and start is not None) else versions_before(
        getattr(kept, "history", None), params, first, stale, L.k, fmt)
    # local steps: each owner's own state (from a checkpoint continued, each owner's own
    # block of its states region; else its state region's, owner 0's)
    own = getattr(kept, "states", None) if H else None
    states = [storage_floats(b, L.m, fmt) for b in np.asarray(own, dtype=np.uint64).reshape(dep.owners, -1)] \
        if own is not None else [state.copy() for _ in range(dep.owners)] if H else []
    outer = dep.consistency.outer
    momentum = np.zeros(params.size) if outer is not None else None  # local steps' outer momentum b
    if outer is not None and getattr(kept, "outer", None) is not None:  # a checkpoint's
        momentum = storage_floats(kept.outer, L.k, fmt)

    def narrow_scalar(w: int) -> float:  # a coefficient as the storage format holds it
        return float(same(np.array([to_float(w)]))[0])
    for u in range(first, first + rounds):
        read = params
        if stale:  # update u's contributions read version max(u - S, 0): the initial words first
            versions[u] = params.copy()
            read = versions[max(u - stale, 0)]
            versions.pop(u - stale - 1, None)
        if by_samples:
            params, state = update(L, params, state, _sample_tree_mean(L, read, samples, u, kind, same),
                                   rate, u)
            if tick is not None:
                tick(u)
            continue
        if mutant == "stale-replica" and u > first:
            raise _stale(u, first)
        if H:  # local steps: each owner's H updates, then the weighted deltas combined
            params, states, momentum = local_round(
                L, params, states, H, dep.owners, shares, owner_sums(contributions, L, samples, u, narrow),
                update, root, u, rate, same,
                mutate=None if mutant is None else (lambda leaves: mutate_leaves(leaves, order, mutant, u, same)),
                select=None if mutant != "deliver-to-next" else (lambda m_: deliver_to_next(
                    m_, [owned_coordinates(dep, o) for o in range(dep.owners)])),
                outer=None if outer is None else (narrow_scalar(outer.rate), narrow_scalar(outer.momentum),
                                                  momentum))
            if tick is not None:
                tick(u)
            continue
        if bound:  # each owner's at the version it read, as the run recorded
            versions[u] = params.copy()
            sums = scheduled_sums(owner_sums(contributions, L, samples, u, narrow), versions, schedule,
                                  u - first, dep.owners)
            versions.pop(u - bound, None)
        else:
            sums = contributions(L, read, samples, u, narrow)
        leaves = {o: Mass(sums[o], int(shares[o])) for o in range(dep.owners)}
        if mutant is not None:
            leaves = mutate_leaves(leaves, order, mutant, u, same)
        m_ = mean(combine(root, leaves, u, same), u, same)
        if mutant == "deliver-to-next":
            m_ = deliver_to_next(m_, [owned_coordinates(dep, o) for o in range(dep.owners)])
        params, state = update(L, params, state, m_, rate, u)
        if tick is not None:
            tick(u)
    if H and L.m:  # each owner's own state: owner 0's stands for `state`
        return _result(dep, rounds, bits_of(params), bits_of(states[0]), first,
                       tuple(bits_of(st) for st in states))
    return _result(dep, rounds, bits_of(params), bits_of(state), first)


def _mutant_deployment(dep: Deployment, mutant: str | None) -> Deployment:
    """foreign-accumulator evaluates the deployment its definition gives (its update and its
    replicated accumulators: alphac.ir.mutants.foreign_accumulator); others `dep` itself."""
    if mutant != "foreign-accumulator":
        return dep
    got = foreign_accumulator(dep)
    if isinstance(got, str):
        raise Refusal("mutant-not-applicable", f"mutant {mutant}: {got}")
    return got


def _mutant_tree(dep: Deployment, root: TreeNode, mutant: str | None) -> TreeNode:
    """The tree the mutant combines along (swap-branch's, else the declared one); refuses
    `mutant-not-applicable` for a mutant that cannot apply to `dep`."""
    why = ""
    if mutant == "swap-branch" and not (isinstance(root, TreeBranch) and isinstance(root.left, TreeBranch)):
        why = "needs a combine tree whose root has a branch on its left (three leaves or more)"
    elif mutant == "deliver-to-next" and dep.owners < 2:
        why = "needs at least two owners (with one, the next owner is the owner itself)"
    elif mutant == "stale-replica" and not dep.partitioning.parameters.sharded:
        why = "needs partitioned parameters (only they are read through a read replica)"
    elif mutant == "stale-replica" and dep.consistency.staleness:
        why = "needs a synchronous learner (under a fixed staleness the replicas are kept by version)"
    if why:
        raise Refusal("mutant-not-applicable", f"mutant {mutant} {why}")
    return swap_branch(root) if mutant == "swap-branch" else root


def _stale(u: int, first: int) -> Refusal:
    """stale-replica: update u's contribution reads the replica kept since update `first`."""
    return Refusal("data-parallel-replica-version",
                   f"update {u}: the contribution of version {u} reads the read replica of "
                   f"version {first}, kept from the first update", site=Site(u, "contribution"))


def _result(dep: Deployment, rounds: int, pw: np.ndarray, sw: np.ndarray,
            first: int = 0, own_states: tuple | None = None) -> OracleResult:
    """The result, in the words the executables hold: a binary32 learner's pack two values a
    word, so an owner holds the words of its coordinates and state offsets (their two values
    are always one owner's). `own_states`: each owner's own state (local steps), in place
    of `sw` for that owner."""
    fmt = dep.contract.profile.format
    pw, sw = storage_words(pw, fmt), storage_words(sw, fmt)
    owners = []
    views: dict[tuple, tuple] = {}
    for o in range(dep.owners):
        pc, so = param_coordinates(dep, o), state_offsets(dep, o)
        if fmt == "binary32":
            pc, so = np.unique(pc // 2), np.unique(so // 2)
        key = (pc.tobytes(), so.tobytes(), o if own_states else -1)
        if key not in views:  # replicated owners share one view and one digest
            p, s = pw[pc], (sw if own_states is None else storage_words(own_states[o], fmt))[so]
            views[key] = (tuple(p.tolist()), tuple(s.tolist()), digest(p, s))
        p, s, d = views[key]
        owners.append(OwnerResult(o, dep.role_of(o).name, dep.placement[o], first + rounds, p, s, d))
    return OracleResult(dep.name, rounds, tuple(pw.tolist()), tuple(sw.tolist()), tuple(owners),
                        first + rounds, first, fmt)
