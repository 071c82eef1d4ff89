"""Numerical contracts: profile, ordered operation list, relation; and their compatibility.

The ordered operation list is derived, never declared: the combine tree's branches in the
order they run, the normalisation, and the update program's statements. A star and a
hierarchy over the same owners therefore have different lists, hence different contracts.
The sample tree's list names its number of samples N and the tree's rule, never owners or
shares: its deployments over N samples share one contract on any owner count.
`compatible` is what a peer handshake or a checkpoint restore asks.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.diagnostics import Diagnostic, DiagnosticBag, Span
from alphac.ir import nodes as ir
from alphac.plan.canon import canonical_json, program_lines, sha256_hex
from alphac.plan.phases import branch_numbers, value_name
from alphac.plan.sampletree import height

# The profile every target executes: binary64 words (or binary32 ones, alphac/plan/storage.py),
# round to nearest even, subnormals kept (no flush to zero), and every arithmetic input and
# output finite or the update refuses.
NATIVE_PROFILE = ir.Profile()
NATIVE_FORMATS = ("binary64", "binary32")
PROFILE_FIELDS = ("format", "rounding", "subnormals", "exceptional")


@dataclass(frozen=True)
class NumericalContract:
    profile: ir.Profile
    relation: str
    topology: str                 # "star", "hierarchy 2", "explicit members"
    ops: tuple[str, ...]          # the ordered operation list

    @property
    def order_digest(self) -> str:
        """sha256 of the ordered operation list: what a manifest or frame header carries."""
        return sha256_hex(canonical_json(list(self.ops)))

    def profile_data(self) -> dict:
        return {f: getattr(self.profile, f) for f in PROFILE_FIELDS}

    def as_json(self) -> dict:
        return {"profile": self.profile_data(), "relation": self.relation,
                "topology": self.topology, "order_digest": self.order_digest,
                "ops": list(self.ops)}


def topology_name(topology: ir.Topology) -> str:
    if isinstance(topology, ir.Star):
        return "star"
    if isinstance(topology, ir.Hierarchy):
        return f"hierarchy {topology.fanout}"
    if isinstance(topology, ir.SampleTree):
        return "sample-tree"
    return f"explicit {topology.coverage}"


def combine_ops(nodes) -> list[str]:
    numbers = branch_numbers(nodes)
    out = []
    for node in nodes:
        if isinstance(node, ir.TreeBranch):
            out.append(f"b{numbers[id(node)]} := {value_name(node.left, numbers)} + "
                       f"{value_name(node.right, numbers)} at {node.owner}")
    return out


def sample_tree_ops(samples: int) -> list[str]:
    """The sample tree's combine over N samples: its rule, which depends on N alone."""
    return [f"sample tree over {samples} samples, root height {height(samples)} covering [0, {samples})",
            "node (h, j) covers [j*2^h, (j+1)*2^h) cut at N; a leaf (h = 0) is one sample's contribution, count 1",
            "a branch whose right half is non-empty := left + right, left first, counts added",
            "a branch whose right half is empty := its left child"]


def derive(dep: ir.Deployment, nodes) -> NumericalContract:
    learner = dep.learner
    if learner.independent:  # the rule alone: nothing is combined and no mean is formed
        ops = ["rule: per owner, on its own region, once per input pair in pair order"]
        ops += [f"rule: {line}" for line in program_lines(learner.contribution)]
        return NumericalContract(dep.contract.profile, dep.contract.relation,
                                 topology_name(dep.topology), tuple(ops))
    if isinstance(dep.topology, ir.SampleTree):
        samples = sum(learner.samples.shares)
        ops = ["contribution: one per sample of the global sample sequence (owner 0's, then owner 1's, ...)"]
        combine = sample_tree_ops(samples)
        total = f"s[0,{samples})"
    else:
        ops = ["contribution: in sample order, per owner"]
        combine = combine_ops(nodes)
        total = value_name(nodes[-1], branch_numbers(nodes))
    c = dep.consistency
    if c.staleness:
        ops.append(f"consistency: fixed staleness {c.value}: the contributions to update u read version "
                   f"max(u - {c.value}, 0)")
    if c.bound:
        ops.append(f"consistency: bounded staleness {c.value}: each owner's contributions to update u read "
                   f"the newest version it has, one of max(u - {c.value}, 0) .. u, recorded in its output "
                   "and replayed")
    H = c.local_steps
    if H:  # docs/learners.md "Local steps"
        ops = [f"local steps {H}: per owner with samples, {H} times from the shared version v: its "
               "contributions in sample order at its own parameters, its own mean := sum / its count, "
               "the update program on its own parameters"]
    ops += [f"contribution: {line}" for line in program_lines(learner.contribution)]
    if H:
        ops += [f"update: {line}" for line in program_lines(learner.update)]
        ops.append("delta: per owner, d := (x - v) * count, per coordinate; an owner without samples (+0.0, 0)")
    ops += [f"combine: {line}" for line in combine]
    ops.append(f"normalise: mean := {total}.sum / {total}.mass")
    outer = c.outer
    ops += ([f"outer: b := {outer.momentum:016x} * b + mean, v := v + {outer.rate:016x} * b, per coordinate "
             "(b from +0.0; each product and sum rounded once)"] if outer is not None else
            ["outer: v := v + mean, per coordinate"]) if H else [
        f"update: {line}" for line in program_lines(learner.update)]
    return NumericalContract(dep.contract.profile, dep.contract.relation,
                             topology_name(dep.topology), tuple(ops))


def check_profile(contract: ir.Contract, fallback: Span, bag: DiagnosticBag,
                  learner: ir.Learner | None = None) -> None:
    """A deployment's profile must be the one the targets execute, and its relation exact, or
    a bound in ulps that conformance evidence supports (alphac/plan/evidence.py: the record
    `alphac conform` stored, against the elementary functions `learner`'s programs call)."""
    span = contract.profile.span if contract.profile.span.line > 0 else (
        contract.span if contract.span.line > 0 else fallback)
    diffs = [f"{f}: declared {getattr(contract.profile, f)!r}, executed {getattr(NATIVE_PROFILE, f)!r}"
             for f in PROFILE_FIELDS if getattr(contract.profile, f) != getattr(NATIVE_PROFILE, f)
             and not (f == "format" and contract.profile.format in NATIVE_FORMATS)]
    if diffs:
        bag.error("numerical-profile-mismatch",
                  "the contract's numeric profile is not the profile the executables run", span, diffs)
    if contract.relation != "exact":
        from alphac.plan import evidence

        evidence.check(contract.relation, learner,
                       contract.span if contract.span.line > 0 else fallback, bag)


def compatible(a, b, span: Span | None = None) -> list[Diagnostic]:
    """Why `b` (a peer's or a checkpoint's contract) cannot be used where `a` runs; [] if it can.
    Either may be a NumericalContract or anything holding one as `.contract` (a Plan)."""
    from alphac.diagnostics import NO_SPAN

    a = getattr(a, "contract", a)
    b = getattr(b, "contract", b)
    span = span or NO_SPAN
    out: list[Diagnostic] = []
    diffs = [f"{f}: {getattr(a.profile, f)!r} here, {getattr(b.profile, f)!r} there"
             for f in PROFILE_FIELDS if getattr(a.profile, f) != getattr(b.profile, f)]
    if a.relation != b.relation:
        diffs.append(f"relation: {a.relation!r} here, {b.relation!r} there")
    if diffs:
        out.append(Diagnostic("numerical-profile-mismatch", "numeric profiles differ", span, tuple(diffs)))
    if a.ops != b.ops:
        notes = [f"topology: {a.topology} here, {b.topology} there"] if a.topology != b.topology else []
        at = next((i for i, (x, y) in enumerate(zip(a.ops, b.ops)) if x != y), min(len(a.ops), len(b.ops)))
        here = a.ops[at] if at < len(a.ops) else "(end)"
        there = b.ops[at] if at < len(b.ops) else "(end)"
        notes.append(f"first difference at operation {at}: {here!r} here, {there!r} there")
        out.append(Diagnostic("numerical-order-mismatch", "the ordered operation lists differ", span,
                              tuple(notes)))
    return out
