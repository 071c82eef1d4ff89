"""Lowering checked values of the learner and deployment families to the IR (ir/nodes.py).

Owns the learner's slot discipline (k, m, s and the erased slot counts, region layouts),
sample widths and shares, and the deployment's purely structural consistency. Combine-tree
coverage, separability and contracts are the planner's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import numpy as np

from alphac.check import words as W
from alphac.check.evaluate import Evaluator
from alphac.check.programs import ProgramLowering
from alphac.check.shapes import LOCAL_CORRELATION, independent_learner
from alphac.check.slots import Layout, Region
from alphac.check.values import (MAX_LEARNER_WORDS, MAX_OWNERS, MAX_SAMPLE_WORDS, MAX_UPDATES, NatRange,
                                 Repeated, VList, VNat, VObj, VProgram, VRows, VString, VWords, nats, whole,
                                 word_count)
from alphac.ir import nodes as ir

LEARNER = "Learning.DataParallel.DataParallelSystem"
DEPLOYMENT = "Learning.Deployment.Deployment"
RESUME = "Learning.Deployment.DeploymentResume"
RESUME_MODES = {"ResumeSameContract": "same", "ResumeNewContract": "new"}
ROLE_NAME = re.compile(r"[a-z][a-z0-9_-]*")
MAX_ROLE_NAME = 64

# The meaning of the deployment families' constructors: which target, combine placement or
# profile they name.
TARGETS = {"TargetX86_64": "x86_64", "TargetAArch64": "aarch64", "TargetSM86": "sm86"}
PLACEMENTS = {"CombineAtBranchOwners": ir.CombinePlacement.BRANCH_OWNERS,
              "CombineAtBlockOwners": ir.CombinePlacement.BLOCK_OWNERS}
# Learning.Deployment.Consistency's constructors: the kind and the field holding its number
CONSISTENCY = {"ConsistencySynchronous": (ir.ConsistencyKind.SYNCHRONOUS, None),
               "ConsistencyFixedStaleness": (ir.ConsistencyKind.FIXED_STALENESS, "staleness"),
               "ConsistencyLocalSteps": (ir.ConsistencyKind.LOCAL_STEPS, "localSteps"),
               "ConsistencyBoundedStaleness": (ir.ConsistencyKind.BOUNDED_STALENESS, "bound")}
PROFILE_WORDS = {
    "StdBinary64": "binary64", "StdBinary32": "binary32", "StdRoundNearestEven": "nearest-even",
    "StdSubnormalsPreserve": "preserve", "StdSubnormalsFlushToZero": "flush-to-zero",
    "StdExceptionalFiniteOrRefuse": "finite-or-refuse", "StdExceptionalPropagate": "propagate",
}


class Lowering:
    def __init__(self, ev: Evaluator):
        self.ev = ev
        self.bag = ev.bag

    # ------------------------------------------------------------------ learner
    def learner(self, obj: VObj) -> ir.Learner | None:
        """The IR of a learner object, or None. Checks what its well-formed fields allow even
        when others failed, so that every problem is reported at once."""
        if "learner" in obj.cache:
            return obj.cache["learner"]
        obj.cache["learner"] = None
        f = obj.fields
        count, width = f.get("dataParallelParameterCount"), f.get("dataParallelSampleWidth")
        k = count.n if isinstance(count, VNat) else None
        s = width.n if isinstance(width, VNat) else None
        initial, state = f.get("dataParallelInitial"), f.get("dataParallelInitialState")
        m = len(state.data) if isinstance(state, VWords) else None
        before = self.bag.count
        if k is not None and k + (m or 0) > MAX_LEARNER_WORDS:
            self.bag.error("learner-too-large", f"k = {k} parameters{f' and m = {m} state words' if m else ''}; "
                           f"a learner holds at most {MAX_LEARNER_WORDS} (2**22) words, so that the "
                           "oracle evaluates it in about 1.6 GiB", count.span)
            return None
        if k is not None and isinstance(initial, VWords) and initial.shape \
                and initial.shape[1] != k:
            self.bag.error("length-mismatch", f"{initial.source} holds a "
                           f"{W.shape_text(initial.shape)} array (rows of "
                           f"{_count(initial.shape[1], 'word')}); the initial parameters are one "
                           f"row of k = {k} words",
                           initial.span)
        elif k is not None and isinstance(initial, VWords) and len(initial.data) != k:
            self.bag.error("length-mismatch", f"dataParallelInitial has {_count(len(initial.data), 'word')}; "
                           f"the learner has k = {k} parameters", initial.span)
        contribution = update = samples = None
        if k is not None and s is not None and m is not None:
            want = (2 * k + s, 2 * k + m + 1)
            names = ("dataParallelContributionSlots", "dataParallelUpdateSlots")
            declared_bad = []
            for arg, need, name, formula in zip(obj.args, want, names, ("2k + s", "2k + m + 1")):
                declared_bad.append(isinstance(arg, int) and arg != need)
                if declared_bad[-1]:
                    self.bag.error("slot-count-mismatch", f"{name} is {arg}, but {formula} = "
                                   f"{need} (k = {k}, s = {s}, m = {m})", obj.type_span)
            declared_bad += [False] * (2 - len(declared_bad))
            if isinstance(f.get("dataParallelContribution"), VProgram):
                contribution = self._program(f["dataParallelContribution"], Layout(
                    "contribution", want[0],
                    (Region("parameters", 0, k), Region("sample", k, k + s),
                     Region("contribution", k + s, 2 * k + s, read_after_write=True)),
                    k + s, 2 * k + s), declared_bad[0])
            if isinstance(f.get("dataParallelUpdate"), VProgram):
                update = self._program(f["dataParallelUpdate"], Layout(
                    "update", want[1],
                    (Region("parameters", 0, k), Region("state", k, k + m),
                     Region("mean", k + m, 2 * k + m), Region("rate", 2 * k + m, 2 * k + m + 1)),
                    0, k + m), declared_bad[1])
        if s is not None and f.get("dataParallelSamples") is not None:
            samples = self._samples(f["dataParallelSamples"], s)
        if (self.bag.count != before or not obj.complete or contribution is None
                or update is None or samples is None):
            return None
        learner = ir.Learner(obj.name or "learner", k, s, m, contribution, update,
                             ir.Words(_small(initial.data), initial.source),
                             ir.Words(_small(state.data), state.source),
                             f["dataParallelRate"].w, samples, obj.span)
        obj.cache["learner"] = learner
        return learner

    def any_learner(self, v) -> ir.Learner | None:
        """A data-parallel or an independent-state learner's IR (check/shapes.py), or None."""
        if not isinstance(v, VObj):
            return None
        return independent_learner(self, v) if v.key == LOCAL_CORRELATION else self.learner(v)

    def _program(self, prog: VProgram, layout: Layout, reported: bool) -> ir.Program | None:
        if isinstance(prog.slots, int) and prog.slots != layout.slots:
            if not reported:  # typed on its own, e.g. a named program value
                self.bag.error("slot-count-mismatch", f"this {layout.what} program is typed for "
                               f"{prog.slots} slots; the learner's {layout.what} has "
                               f"{layout.slots}", prog.span)
            return None
        return ProgramLowering(self.ev, prog, layout).lower()

    def _samples(self, v, s: int) -> ir.Samples | None:
        listed = len(v.shares) if isinstance(v, VRows) else len(v.items)
        if listed > MAX_OWNERS:  # refused before any owner's samples are looked at
            self.bag.error("owner-count", f"the learner lists samples for {listed} owners; a "
                           f"deployment has at most {MAX_OWNERS}", v.span)
            return None
        if isinstance(v, VRows):
            return self._loaded_samples(v, s)
        # measured before a sample is looked at: a repeat of repeats names more than is expanded
        shares = tuple(len(per_owner.items) for per_owner in v.items)
        words = word_count(v)
        if max(sum(shares), words) > MAX_SAMPLE_WORDS:
            self.bag.error("samples-too-large", f"the learner's samples hold {words} words in "
                           f"{sum(shares)} samples; at most {MAX_SAMPLE_WORDS} (2**26) words and as many "
                           "samples, as one word file loads", v.span)
            return None
        blocks: list[np.ndarray] = []
        ok = True
        for owner, per_owner in enumerate(v.items):
            items = per_owner.items
            # a repeated sample is one sample, looked at once and copied as the block it stands for
            looked = (items.item,) if isinstance(items, Repeated) and len(items) else items
            for i, sample in enumerate(looked):
                if len(sample.data) != s:
                    self.bag.error("sample-width", f"owner {owner}'s sample {i} has "
                                   f"{_count(len(sample.data), 'word')}; the sample width s is {s}",
                                   sample.span)
                    ok = False
            if not ok or not len(items):  # `repeat 0 of` a sample of any width holds no sample
                continue
            blocks.append(np.broadcast_to(items.item.data, (len(items), s)) if isinstance(items, Repeated)
                          else np.array([x.data for x in items], dtype=np.uint64).reshape(len(items), s))
        if not ok:
            return None
        rows = np.concatenate(blocks) if blocks else np.zeros((0, s), dtype=np.uint64)
        return ir.Samples(s, shares, rows.astype(np.uint64, copy=False))

    def _loaded_samples(self, v: VRows, s: int) -> ir.Samples | None:
        try:
            data = W.load_words(v.path)
        except W.WordError as exc:
            self.bag.error("sample-file", exc.message, v.span, exc.notes)
            return None
        if data.ndim == 2 and data.shape[1] != s:
            self.bag.error("sample-width", f"{v.path} holds a {W.shape_text(data.shape)} array: "
                           f"samples of {_count(data.shape[1], 'word')}, but the sample width s is {s}",
                           v.span)
            return None
        if data.ndim not in (1, 2):
            self.bag.error("sample-width", f"{v.path} holds a {W.shape_text(data.shape)} array; "
                           f"samples load from a 2-D array of rows of s = {s} words, or a flat "
                           "word list", v.span)
            return None
        data = data.reshape(-1)
        if s == 0 or len(data) % s:
            self.bag.error("sample-width", f"{v.path} holds {len(data)} words, not whole samples "
                           f"of width {s}", v.span)
            return None
        rows = len(data) // s
        if sum(v.shares) != rows:
            self.bag.error("sample-shares", f"the shares {list(v.shares)} add up to "
                           f"{sum(v.shares)}, but {v.path} holds {rows} samples", v.span)
            return None
        bad = W.first_non_finite(data)
        if bad >= 0:
            self.bag.error("non-finite-literal", f"sample {bad // s} word {bad % s} of {v.path} is "
                           "not a finite binary64 number", v.span)
            return None
        return ir.Samples(s, v.shares, data.reshape(rows, s), v.path)

    # ------------------------------------------------------------------ deployment
    def deployment(self, obj: VObj, source_file: str) -> ir.Deployment | None:
        """The IR of a deployment object, or None; like `learner`, checks every well-formed
        part even when others failed."""
        f = obj.fields
        before = self.bag.count
        lv = f.get("deploymentLearner")
        learner = self.any_learner(lv)
        ov = f.get("deploymentOwners")
        owners = ov.n if isinstance(ov, VNat) else None
        if owners == 0 or (owners or 0) > MAX_OWNERS:
            self.bag.error("owner-count", f"a deployment has 1 to {MAX_OWNERS} owners, not {owners}",
                           ov.span)
            owners = None
        if owners is not None and learner is not None and len(learner.samples.shares) != owners:
            self.bag.error("owner-count", f"the learner lists samples for "
                           f"{len(learner.samples.shares)} owners; the deployment has {owners}",
                           ov.span)
        parts = {}
        for name, lower in (("deploymentTopology", self._topology),
                            ("deploymentPartitioning", self._partitioning),
                            ("deploymentContract", self._contract),
                            ("deploymentCheckpoint", self._checkpoint),
                            ("deploymentCombinePlacement", lambda c: PLACEMENTS[c.ctor]),
                            ("deploymentConsistency", self._consistency)):
            v = f.get(name)
            parts[name] = lower(v) if whole(v) else None
        roles_v = f.get("deploymentRoles")
        roles = self._roles(roles_v, owners) if owners is not None and whole(roles_v) else None
        placement_v = f.get("deploymentPlacement")
        placement = None
        if isinstance(placement_v, VList):
            # measured before it is looked at target by target
            length = len(placement_v.items)
            if owners is not None and length != owners:
                self.bag.error("placement-length", f"the placement names "
                               f"{_count(length, 'target')} for {owners} owners",
                               placement_v.span)
            elif owners is None and length > MAX_OWNERS:
                self.bag.error("placement-length", f"the placement names "
                               f"{_count(length, 'target')}; a deployment has at most "
                               f"{MAX_OWNERS} owners", placement_v.span)
            elif whole(placement_v):
                placement = tuple(TARGETS[t.ctor] for t in placement_v.items)
        uv = f.get("deploymentUpdates")
        if isinstance(uv, VNat) and uv.n > MAX_UPDATES:
            self.bag.error("updates-limit", f"{uv.n} updates; a deployment makes at most "
                           f"{MAX_UPDATES}", uv.span)
        fanout_bound = self._fanout_bound(f.get("deploymentTopology"), owners)
        if (self.bag.count != before or not obj.complete or learner is None
                or roles is None or placement is None or None in parts.values()
                or not fanout_bound):
            return None
        return ir.Deployment(obj.name or "deployment", learner, owners,
                             parts["deploymentTopology"], parts["deploymentPartitioning"],
                             roles, placement, f["deploymentUpdates"].n,
                             parts["deploymentContract"], parts["deploymentCheckpoint"],
                             source_file, obj.span,
                             combine_placement=parts["deploymentCombinePlacement"],
                             combine_placement_span=f["deploymentCombinePlacement"].span,
                             consistency=parts["deploymentConsistency"])

    def resume(self, obj: VObj, source_file: str) -> tuple[VObj, ir.Resume] | None:
        """The deployment object a resume declaration names and its IR, or None when one of
        its fields did not check (already reported). The checkpoint path is relative to
        the directory of the file the declaration is in, like a `load` path."""
        f = obj.fields
        target, path, mode = (f.get(n) for n in ("resumeDeployment", "resumeCheckpoint",
                                                  "resumeContract"))
        if not (obj.complete and isinstance(target, VObj) and isinstance(path, VString)
                and isinstance(mode, VObj) and mode.ctor in RESUME_MODES):
            return None
        return target, ir.Resume(str(Path(source_file).parent / path.s), RESUME_MODES[mode.ctor],
                                 obj.span)

    def _topology(self, t: VObj):
        if t.ctor == "DataParallelStar":
            return ir.Star(t.span)
        if t.ctor == "DataParallelHierarchy":
            fanout = t.fields["dataParallelFanout"].n
            if fanout < 1:
                self.bag.error("invalid-fanout", "a hierarchy's fan-out is at least 1", t.span)
                return None
            return ir.Hierarchy(fanout, t.span)
        if t.ctor == "DataParallelSampleTree":
            return ir.SampleTree(t.span)
        combine = t.fields["dataParallelCombine"]
        cov = combine.fields["orderedCombineCoverage"]
        members = next(iter(cov.fields.values()))
        kind = "members" if cov.ctor == "OrderedCombineMembers" else "group"
        root = self._tree(combine.fields["orderedCombineTree"])
        deliver = combine.fields["orderedCombineDelivery"]
        target = (deliver.fields["combineDeliveryTarget"].n
                  if deliver.ctor == "CombineDeliverTo" else None)
        return ir.ExplicitTree(root, kind, nats(members), t.span, target)

    def _fanout_bound(self, t, owners: int | None) -> bool:
        """A hierarchy's fan-out is at most the owner count (a fan-out of owners - 1 already
        makes every owner but 0 a child of 0): the planner's and the oracle's walks over an
        owner's children then stay within the owners."""
        if not (isinstance(t, VObj) and t.ctor == "DataParallelHierarchy"):
            return True
        fv = t.fields.get("dataParallelFanout")
        if not isinstance(fv, VNat):
            return True
        limit = owners if owners is not None else MAX_OWNERS
        if fv.n <= limit:
            return True
        bound = (f"the deployment's {owners} owners" if owners is not None
                 else f"{MAX_OWNERS}, the most owners a deployment may have")
        self.bag.error("invalid-fanout", f"a hierarchy's fan-out is at most its owner count; "
                       f"{fv.n} is more than {bound}", fv.span,
                       ["each owner i combines the subtrees of owners f*i+1 .. f*i+f; a fan-out of "
                        "owners - 1 already makes every other owner a child of owner 0"])
        return False

    def _tree(self, node: VObj) -> ir.TreeNode:
        # Iterative: a declared tree may be as deep as its owner count.
        built: dict[int, ir.TreeNode] = {}
        stack = [(node, False)]
        while stack:
            n, expanded = stack.pop()
            if n.ctor == "OrderedCombineLeaf":
                built[id(n)] = ir.TreeLeaf(n.fields["orderedCombineOwner"].n, n.span)
            elif not expanded:
                stack.append((n, True))
                stack.append((n.fields["orderedCombineRight"], False))
                stack.append((n.fields["orderedCombineLeft"], False))
            else:
                built[id(n)] = ir.TreeBranch(n.fields["orderedCombineOwner"].n,
                                             built[id(n.fields["orderedCombineLeft"])],
                                             built[id(n.fields["orderedCombineRight"])], n.span)
        return built[id(node)]

    def _partitioning(self, p: VObj) -> ir.Partitioning | None:
        f = p.fields
        blocks = f["partitionBlockWords"]
        if blocks.n < 1:
            self.bag.error("partition-block-words", f"partitionBlockWords is {blocks.n}; a "
                           "coordinate block holds at least one coordinate", blocks.span,
                           ["block b (coordinates b*B .. b*B + B - 1) belongs to owner b mod n; "
                            "B = 1 gives coordinate i to owner i mod n"])
            return None
        if blocks.n > MAX_LEARNER_WORDS:  # the planner lays a block out coordinate by coordinate
            self.bag.error("partition-block-words", f"partitionBlockWords is {blocks.n}; a coordinate "
                           f"block holds at most {MAX_LEARNER_WORDS} (2**22), the most words a learner "
                           "holds", blocks.span, ["a block larger than k is one block: all of it at owner 0"])
            return None
        if p.ctor == "DataParallelReplicated":
            return ir.Partitioning(block_words=blocks.n, span=p.span)
        return ir.Partitioning(ir.placed(f["partitionParameters"].b),
                               ir.placed(f["partitionOptimizerState"].b),
                               ir.placed(f["partitionGradients"].b), f["partitionWordsPerCoordinate"].n,
                               nats(f["partitionSharedState"]), blocks.n, p.span)

    def _roles(self, v: VList, owners: int) -> tuple[ir.Role, ...]:
        roles = []
        holder: dict[int, str] = {}
        first: dict[str, VString] = {}
        if len(v.items) > MAX_OWNERS:
            self.bag.error("role-coverage", f"the deployment lists {len(v.items)} roles; at most "
                           f"{MAX_OWNERS}, the most owners a deployment may have", v.span)
            return ()
        # Owners are looked at one by one up to twice the owner count over all roles (a sound
        # deployment lists each owner once); past that, a role is refused as a whole.
        budget, unknown = 2 * owners, False
        for r in v.items:
            name_v = r.fields["roleName"]
            name = name_v.s
            self._role_name(name_v, first)
            members = []
            listed = r.fields["roleOwners"]
            items = listed.items
            if isinstance(items, NatRange) and items.hi > owners:
                # one diagnostic for the part of a range beyond the owners, never one per owner
                a, b = max(items.lo, owners), items.hi - 1
                shown = f"owner {a}" if a == b else f"owners {a} .. {b}"
                self.bag.error("role-owner-out-of-range",
                               f"role {name} names {shown}; owners are 0 .. {owners - 1}",
                               listed.span)
                items = NatRange(items.lo, owners, items.span)
            elif len(items) > owners:
                self.bag.error("role-coverage", f"role {name} lists {_count(len(items), 'owner')}, "
                               f"more than the deployment's {owners}; every owner holds exactly "
                               "one role", listed.span)
                items = ()
                unknown = True  # who it meant to hold is not looked at
            elif len(items) > budget:
                self.bag.error("role-coverage", f"with role {name}, the roles list more than "
                               f"{2 * owners} owners in all; the deployment has {owners}, and "
                               "every owner holds exactly one role", listed.span)
                items = ()
                unknown = True
            budget -= len(items)
            for n in items:
                if n.n >= owners:
                    if not self.bag.skip("role-owner-out-of-range"):
                        self.bag.error("role-owner-out-of-range", f"role {name} names owner "
                                       f"{n.n}; owners are 0 .. {owners - 1}", n.span)
                    continue
                if n.n in holder:
                    if not self.bag.skip("role-coverage"):
                        self.bag.error("role-coverage", f"owner {n.n} is in role {holder[n.n]} "
                                       f"and in role {name}; every owner holds exactly one role",
                                       n.span)
                    continue
                holder[n.n] = name
                members.append(n.n)
            roles.append(ir.Role(name, tuple(members), r.span))
        missing = [o for o in range(owners) if o not in holder]
        if missing and owners and not unknown:
            shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            self.bag.error("role-coverage", f"owner{'s' if len(missing) > 1 else ''} {shown} "
                           "hold no role; every owner holds exactly one role", v.span)
        return tuple(roles)

    def _role_name(self, v: VString, first: dict[str, VString]) -> None:
        """A role name names executables (`{spec}-{role}-{target}`) and output files: a short
        lowercase word, unique within the deployment."""
        name = v.s
        if len(name) > MAX_ROLE_NAME or not ROLE_NAME.fullmatch(name):
            if self.bag.skip("role-name-invalid"):
                return
            why = (f"has {len(name)} characters; at most {MAX_ROLE_NAME}" if len(name) > MAX_ROLE_NAME
                   else "is not a lowercase letter followed by lowercase letters, digits, '_' or '-'")
            self.bag.error("role-name-invalid", f"role name {_quoted(name)} {why}", v.span,
                           ["executables and their outputs are named after the role: "
                            "{spec}-{role}-{target}"])
            return
        if name in first:
            if self.bag.skip("role-name-duplicate"):
                return
            self.bag.error("role-name-duplicate", f"two roles are named {_quoted(name)}", v.span,
                           [f"the first role named {_quoted(name)} is at {first[name].span}",
                            "every role of a deployment has its own name"])
            return
        first[name] = v

    def _contract(self, c: VObj) -> ir.Contract:
        p = c.fields["numericalProfile"].fields
        profile = ir.Profile(*(PROFILE_WORDS[p[name].ctor] for name in (
            "stdNumericFormat", "stdNumericRounding", "stdNumericSubnormals",
            "stdNumericExceptional")), span=c.fields["numericalProfile"].span)
        rel = c.fields["numericalRelation"]
        relation = "exact" if rel.ctor == "NumericalExact" else \
            bounded_relation(rel.fields["numericalBoundUlps"].n, rel.fields["numericalEvidence"].s)
        return ir.Contract(profile, relation, c.span)

    def _consistency(self, c: VObj) -> ir.Consistency:
        kind, field_name = CONSISTENCY[c.ctor]
        n = c.fields[field_name].n if field_name else 0
        if n == 0 and kind in (ir.ConsistencyKind.FIXED_STALENESS, ir.ConsistencyKind.BOUNDED_STALENESS):
            # (every read is version u: the synchronous learner itself)
            kind = ir.ConsistencyKind.SYNCHRONOUS
        if kind is ir.ConsistencyKind.LOCAL_STEPS and n == 0:
            self.bag.error("consistency-value", "0 local steps between combines would never update",
                           c.fields[field_name].span, ["an owner applies H >= 1 updates between combines"])
        o = c.fields.get("localOuter")  # local steps' outer update (OuterAverage: None)
        m = o.fields if o is not None and o.ctor == "OuterMomentum" else None
        return ir.Consistency(kind, n, c.span, m and ir.OuterMomentum(m["outerRate"].w, m["outerMomentum"].w))

    def _checkpoint(self, c: VObj) -> ir.Checkpoint:
        if c.ctor == "CheckpointNever":
            return ir.Checkpoint(0, "", c.span)
        interval = c.fields["checkpointInterval"]
        if interval.n == 0:  # would silently never checkpoint
            self.bag.error("checkpoint-interval", "a checkpoint every 0 updates is never taken",
                           getattr(interval, "span", c.span),
                           ["checkpoint every I >= 1 updates, or write CheckpointNever"])
        return ir.Checkpoint(interval.n, c.fields["checkpointDirectory"].s, c.span)


def bounded_relation(bound: int, evidence: str) -> str:
    """A bounded relation as the contract names it: `ulps:N`, or `ulps:N@EVIDENCE` with the
    evidence (a record's sha256, or a path to it) percent-encoded into one token without
    spaces (alphac/plan/evidence.py reads it back)."""
    if not evidence:
        return f"ulps:{bound}"
    return f"ulps:{bound}@{quote(evidence, safe='/._-~+:=,')}"


def _quoted(name: str, limit: int = 40) -> str:
    """A role name for a message: quoted, escaped, and cut short when long."""
    shown = name if len(name) <= limit else name[:limit] + "..."
    return json.dumps(shown, ensure_ascii=True)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _small(data: np.ndarray):
    """Short word vectors as tuples (cheap to hash and print), long ones as arrays of their
    own (a repeat's one-word view is copied here, once the learner has been measured)."""
    return tuple(int(w) for w in data) if len(data) <= 4096 else np.ascontiguousarray(data)
