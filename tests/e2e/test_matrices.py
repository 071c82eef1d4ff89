"""Matrices and vector temporaries in the indexed form (docs/language.md "Matrices and vector
temporaries"): 2-D views, nested loops and sums, `let z[i] = e`. A two-layer network's
forward and backward pass gives the same words on the scalar, vector and numba engines and
in the kernels, the words of a plain sequential Python evaluation; a refusal names its
statement and every variable; the checker's diagnostics for each misuse; affine indices
leave the canonical encoding of existing programs as it was; the vector temporaries are
counted in the plan's peak bytes and by the executables; and the tanh network of
specs/tanh_network_adam.alpha runs on mixed owners equal to the oracle and follows an
independent numpy learner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir

from alphac.check import check_file, load_deployment
from alphac.codegen.program import emit_program, fast_loop_ok, program_regions, statement_labels
from alphac.ir import nodes as n
from alphac.ir.words import to_bits as word
from alphac.oracle import Refusal, evaluate
from alphac.oracle.refusal import Site
from alphac.oracle.scalar import run_program
from alphac.oracle.vector import SlotStore, vectorisable
from alphac.oracle.vector import run_program as run_vector


from test_codegen_program import Kernel, bits
from test_oracle_differential import outcome

ROOT = Path(__file__).resolve().parents[2]
TANH = ROOT / "specs" / "tanh_network_adam.alpha"
H, D = 4, 3  # hidden width, inputs
K = H * D + 2 * H + 1
S = D + 1

SAMPLES = [[[0.5, -1.0, 2.0, 0.3]],
           [[1.5, 0.25, -0.5, -0.7], [0.1, 0.2, 0.3, 0.4]],
           [[-1.0, 1.0, 0.5, 1.1], [2.0, -0.3, 0.7, -0.2], [0.9, 0.8, -0.6, 0.05]],
           []]
INITIAL = [0.1, -0.2, 0.3, 0.05, 0.4, -0.1, -0.3, 0.2, 0.15, 0.25, -0.05, 0.35,  # W
           0.0, 0.01, -0.01, 0.02,                                              # b
           0.5, -0.4, 0.3, -0.2,                                                # v
           0.1]                                                                 # c


def network_spec(samples=SAMPLES, initial=INITIAL, updates=3) -> str:
    """A two-layer network with the softsign activation a = z / (1 + |z|) (exact
    operations, so every engine runs it), its gradient with nested loops, a 2-D view and
    vector temporaries; the update clips W's gradient by its norm (a sum of sums) and steps
    W in a nested loop."""
    rows = ",\n".join("    [" + ", ".join("[" + ", ".join(repr(x) for x in s) + "]" for s in o) + "]"
                      for o in samples)
    return f"""module Net
import Learning.Deployment

value h : Nat = {H}
value d : Nat = {D}
value k : Nat = h * d + 2 * h + 1
value s : Nat = d + 1

value net : (family DataParallelSystem (2 * k + s) (2 * k + 1)) = DataParallelSystemOf {{
  dataParallelParameterCount = k,
  dataParallelSampleWidth = s,
  dataParallelContribution = pointwise {{
    view W = slot 0 .. h * d as h by d
    view b = slot h * d .. h * d + h
    view v = slot h * d + h .. h * d + 2 * h
    view c = slot h * d + 2 * h
    view x = slot k .. k + d
    view y = slot k + d
    view gW = slot k + s .. k + s + h * d as h by d
    view gb = slot k + s + h * d .. k + s + h * d + h
    view gv = slot k + s + h * d + h .. k + s + h * d + 2 * h
    view gc = slot k + s + h * d + 2 * h
    for i in 0 .. h {{
      let z[i] = (sum j in 0 .. d of W[i, j] * x[j]) + b[i]
      let a[i] = z[i] / (1.0 + abs(z[i]))
    }}
    let r = ((sum i in 0 .. h of v[i] * a[i]) + c) - y
    gc := r
    for i in 0 .. h {{
      let q = 1.0 + abs(z[i])
      let e[i] = r * v[i] / (q * q)
      gv[i] := r * a[i]
      gb[i] := e[i]
      for j in 0 .. d {{
        gW[i, j] := e[i] * x[j]
      }}
    }}
  }},
  dataParallelUpdate = pointwise {{
    view W = slot 0 .. h * d as h by d
    view w = slot 0 .. k
    view g = slot k .. k + h * d as h by d
    view m = slot k .. 2 * k
    view rate = slot 2 * k
    let norm = sqrt(sum i in 0 .. h of sum j in 0 .. d of g[i, j] * g[i, j])
    let scale = min(1.0, 0.5 / max(norm, 1e-300))
    for i in 0 .. h {{
      for j in 0 .. d {{
        W[i, j] := W[i, j] - rate * scale * g[i, j]
      }}
    }}
    for t in h * d .. k {{
      w[t] := w[t] - rate * m[t]
    }}
  }},
  dataParallelInitial = [{", ".join(repr(x) for x in initial)}],
  dataParallelInitialState = [],
  dataParallelRate = 0.05,
  dataParallelSamples = [
{rows}
  ],
}}

value run : Deployment = DeploymentOf {{
  deploymentLearner = net,
  deploymentOwners = 4,
  deploymentTopology = DataParallelStar,
  deploymentPartitioning = DataParallelReplicated,
  deploymentRoles = [
    RoleOf {{ roleName = "coordinator", roleOwners = [0] }},
    RoleOf {{ roleName = "worker", roleOwners = [1 .. 4] }},
  ],
  deploymentPlacement = [TargetX86_64, TargetAArch64, TargetX86_64, TargetAArch64],
  deploymentUpdates = {updates},
  deploymentContract = binary64Exact,
  deploymentCheckpoint = CheckpointNever,
}}
"""


def deployment(tmp_path, **kw) -> n.Deployment:
    path = tmp_path / "net.alpha"
    path.write_text(network_spec(**kw))
    return load_deployment(str(path))


# ----------------------------------------------------------------------------- a reference


def forward_backward(w: list[float], sample: list[float]) -> list[float]:
    """The contribution, written out with Python floats in the declared order."""
    W = [w[i * D:(i + 1) * D] for i in range(H)]
    b, v, c = w[H * D:H * D + H], w[H * D + H:H * D + 2 * H], w[H * D + 2 * H]
    x, y = sample[:D], sample[D]
    z, a = [], []
    for i in range(H):
        acc = W[i][0] * x[0]
        for j in range(1, D):
            acc = acc + W[i][j] * x[j]
        z.append(acc + b[i])
        a.append(z[i] / (1.0 + abs(z[i])))
    out = v[0] * a[0]
    for i in range(1, H):
        out = out + v[i] * a[i]
    r = (out + c) - y
    gW, gb, gv = [0.0] * (H * D), [0.0] * H, [0.0] * H
    for i in range(H):
        q = 1.0 + abs(z[i])
        e = r * v[i] / (q * q)
        gv[i] = r * a[i]
        gb[i] = e
        for j in range(D):
            gW[i * D + j] = e * x[j]
    return gW + gb + gv + [r]


def test_the_engines_compute_the_written_out_network():
    """The scalar and vector engines give the words of the plain evaluation above, sample
    by sample (a 2-D view is row-major, a vector temporary holds one word per index)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        L = deployment(Path(tmp)).learner
    rows = np.asarray(L.samples.words, dtype=np.uint64).view(np.float64).reshape(-1, S)
    w = np.asarray(L.initial.as_array(), dtype=np.uint64).view(np.float64).tolist()
    for row in rows.tolist():
        slots = w + row + [0.0] * K
        got = run_program(L.contribution, list(slots), Site(0, "contribution"))[K + S:]
        assert [word(g) for g in got] == [word(g) for g in forward_backward(w, row)]
        store = SlotStore([(0, np.array(slots).reshape(-1, 1))])
        vec = run_vector(L.contribution, store).rows(K + S, 2 * K + S)[:, 0]
        assert bits(vec) == [word(g) for g in got]


def test_scalar_vector_and_numba_give_the_same_words(tmp_path):
    dep = deployment(tmp_path)
    got = {engine: outcome(dep, engine) for engine in ("scalar", "vector", "numba")}
    assert got["scalar"][0] == "ok"
    assert got["scalar"] == got["vector"] == got["numba"]
    # the update moved every parameter: the nested loop over W and the flat one over the rest
    assert all(a != b for a, b in zip(got["scalar"][1], dep.learner.initial.as_tuple()))


def enclosing_loops(p: n.Program) -> dict:
    """(line, column) of each statement -> the variables of the loops around it, outermost
    first."""
    out: dict = {}

    def walk(body, loops):
        for st in body:
            if isinstance(st, n.Loop):
                walk(st.body, loops + [st.var])
            else:
                out[(st.span.line, st.span.col)] = loops
    walk(p.body, [])
    return out


def test_the_kernels_give_the_engines_words_and_refusals(tmp_path):
    """Both programs compiled for x86-64, against the scalar engine on random slots (some
    pushed to overflow): the same words, or the same statement; its coordinate is the
    innermost loop's."""
    L = deployment(tmp_path).learner
    rng = np.random.default_rng(31)
    refusals = 0
    for kind, p in (("contribution", L.contribution), ("update", L.update)):
        regions = program_regions(kind, L.k, L.s, L.m)
        kern = Kernel(tmp_path, p, regions, f"net_{kind}")
        for trial in range(300):
            slots = rng.standard_normal(p.slots) * 10.0 ** rng.integers(-2, 3, p.slots)
            if trial % 3 == 0:
                slots[rng.integers(0, p.slots)] = rng.choice([1e300, -1e305, np.inf, np.nan, 0.0])
            status, coord, out = kern(slots)
            try:
                want = run_program(p, slots.tolist(), Site(0, kind))
            except Refusal as r:
                refusals += 1
                assert status > 0
                assert kern.labels[status - 1].decode().split(" (")[0] == r.statement
                binds = dict(b.split("=") for b in r.coordinate.split(", ") if "=" in b)
                loops = enclosing_loops(p)[(r.span.line, r.span.col)]
                assert coord == (int(binds[loops[-1]]) if loops else -1), (r.statement, r.coordinate)
                continue
            assert status == 0, kern.labels[status - 1]
            assert bits(out) == bits(np.asarray(want))
    assert refusals > 30


def test_a_refusal_names_the_statement_and_every_variable(tmp_path):
    """gW[i, j] overflows first at i = 2, j = 1: x[1] is huge, e[0] = e[1] = 0 (v[0] = v[1]
    = 0, and no weight reads x[1]), e[2] is large. Every engine names `gW[i, j]` at
    `i=2, j=1`; the kernel names the statement and the inner loop's coordinate."""
    initial = list(INITIAL)
    for i in range(H):
        initial[i * D + 1] = 0.0        # W[i, 1]: z never reads x[1]
    initial[H * D + H + 0] = initial[H * D + H + 1] = 0.0  # v[0], v[1]
    initial[H * D + H + 2] = 5.0
    sample = [0.01, 1e308, 0.01, -100.0]
    dep = deployment(tmp_path, samples=[[sample], [], [], []], initial=initial, updates=1)
    details = {engine: outcome(dep, engine) for engine in ("scalar", "vector", "numba")}
    assert details["scalar"] == details["vector"] == details["numba"]
    status, code, detail = details["scalar"]
    assert (status, code) == ("refused", "non-finite")
    assert "`gW[i, j]` (" in detail and detail.endswith("at i=2, j=1: non-finite result of mul")

    L = dep.learner
    kern = Kernel(tmp_path, L.contribution, program_regions("contribution", L.k, L.s, L.m), "refuse")
    slots = np.array(initial + sample + [0.0] * K)
    status, coord, _ = kern(slots)
    assert kern.labels[status - 1].decode().startswith("gW[i, j] (net.alpha:")
    assert coord == 1


def test_a_vector_temporary_refuses_under_its_own_label(tmp_path):
    """z[0]'s sum overflows at its second term: W[0, 0] x[0] + W[0, 1] x[1] = 3e308."""
    initial = list(INITIAL)
    initial[0] = initial[1] = 1.5
    sample = [1e308, 1e308, 0.0, 0.0]
    dep = deployment(tmp_path, samples=[[sample], [], [], []], initial=initial, updates=1)
    details = {engine: outcome(dep, engine) for engine in ("scalar", "vector", "numba")}
    assert details["scalar"] == details["vector"] == details["numba"]
    assert "`let z[i]` (" in details["scalar"][2]
    assert details["scalar"][2].endswith(" at i=0, j=1: non-finite partial sum")


# ----------------------------------------------------------------------------- engines' tests


def test_vectorisation_is_refused_where_it_would_change_the_words():
    C = n.Const(word(2.0))
    # a vector temporary of the loop read at another index (IR built by hand)
    shifted = n.Loop("i", 1, 4, (n.VectorLet("z", "i", 1, 4, n.SlotRef(n.Index(0, "i"))),
                                 n.Assign(n.Index(8, "i"), n.VectorLocal("z", n.Index(-1, "i")))))
    ranges: dict = {}
    assert not vectorisable(shifted, ranges) and not fast_loop_ok(shifted)
    # ... or before its `let`
    early = n.Loop("i", 1, 4, (n.Assign(n.Index(8, "i"), n.VectorLocal("z", n.Index(0, "i"))),
                               n.VectorLet("z", "i", 1, 4, n.SlotRef(n.Index(0, "i")))))
    assert not vectorisable(early, ranges) and not fast_loop_ok(early)
    # at its index, after the let: both vectorise
    fine = n.Loop("i", 1, 4, (n.VectorLet("z", "i", 1, 4, n.Binary("mul", n.SlotRef(n.Index(0, "i")), C)),
                              n.Assign(n.Index(8, "i"), n.VectorLocal("z", n.Index(0, "i")))))
    assert vectorisable(fine, ranges) and fast_loop_ok(fine)
    # two written views overlapping: statement by statement, the later would win everywhere
    overlap = n.Program(12, (n.Loop("i", 0, 3, (n.Assign(n.Index(8, "i"), C),
                                                 n.Assign(n.Index(9, "i"), n.Binary("add", C, C)))),))
    assert not vectorisable(overlap.body[0], ranges) and not fast_loop_ok(overlap.body[0])
    scalar = run_program(overlap, [0.0] * 12, Site(0, "update"))
    vector = run_vector(overlap, SlotStore([(0, np.zeros((12, 1)))])).rows(0, 12)[:, 0]
    assert scalar[8:12] == [2.0, 2.0, 2.0, 4.0] and bits(vector) == bits(np.array(scalar))
    # a read at an affine index is not taken by the chunked loop
    strided = n.Loop("i", 0, 3, (n.Assign(n.Index(8, "i"), n.SlotRef(n.Index(0, None, (("i", 2),)))),))
    assert not fast_loop_ok(strided)


def test_a_program_with_vector_temporaries_is_one_device_segment(tmp_path):
    from alphac.codegen.device import segments

    L = deployment(tmp_path).learner
    assert len(segments(L.update, owned=False)) > 1  # no temporaries: cut at its loops
    p = n.Program(L.update.slots, L.update.body + (
        n.Loop("i", 0, 2, (n.VectorLet("z", "i", 0, 2, n.SlotRef(n.Index(0, "i"))),)),))
    assert len(segments(p, owned=False)) == 1


def test_vector_temporaries_are_stack_scratch_of_the_kernel(tmp_path):
    L = deployment(tmp_path).learner
    module = ir.Module("m")
    emit_program(module, L.contribution, "kern", program_regions("contribution", L.k, L.s, L.m))
    text = str(module)
    assert text.count(f"alloca double, i32 {H}") == 3  # z, a and e
    assert statement_labels(L.contribution)[0].startswith("let z[i] (net.alpha:")


# ----------------------------------------------------------------------------- the checker

BASE = (ROOT / "tests" / "errors" / "temporary-out-of-range.alpha").read_text().replace(
    "z[0] + z[2] - y", "z[0] + z[1] - y")
CONTRIBUTION = ("    view x = slot 6 .. 9\n", "    view x = slot 6 .. 9\n    view gf = slot 10 .. 16\n")
UPDATE_HEAD = "  dataParallelUpdate = pointwise {\n"


def diagnostics(tmp_path, text: str) -> list[tuple[str, int, int]]:
    path = tmp_path / "case.alpha"
    path.write_text(text)
    _, found, _ = check_file(str(path))
    return [(d.code, d.span.line, d.span.col) for d in found]


def in_contribution(body: str) -> str:
    start = BASE.index("    for i in 0 .. 2 {\n      let z[i]")
    end = BASE.index("  },\n  dataParallelUpdate")
    return BASE[:start].replace(*CONTRIBUTION) + body + BASE[end:]


def in_update(body: str) -> str:
    start = BASE.index(UPDATE_HEAD) + len(UPDATE_HEAD)
    end = BASE.index("  },\n  dataParallelInitial")
    views = ("    view W = slot 0 .. 6 as 2 by 3\n    view w = slot 0 .. 6\n"
             "    view g = slot 6 .. 12 as 2 by 3\n    view rate = slot 12\n")
    return BASE[:start] + views + body + BASE[end:]


def test_the_base_program_checks(tmp_path):
    assert diagnostics(tmp_path, BASE) == []


MISUSES = {
    # (where, body, the diagnostics: code, line, column)
    "two indices on a 1-D view": ("c", "    gf[0] := x[0, 1]\n", [("index-rank-mismatch", 14, 14)]),
    "one index on a 2-D view": ("c", "    g[0] := y\n", [("index-rank-mismatch", 14, 5)]),
    "a 2-D view without index": ("c", "    g := y\n", [("type-mismatch", 14, 5)]),
    "two indices on a temporary": ("c", "    for i in 0 .. 2 { let z[i] = x[i] }\n    gf[0] := z[0, 1]\n",
                                   [("index-rank-mismatch", 15, 14)]),
    "a row outside the view": ("c", "    for i in 0 .. 3 { g[i, 0] := y }\n", [("index-out-of-range", 14, 23)]),
    "a column outside the view": ("c", "    for j in 1 .. 4 { g[1, j] := y }\n", [("index-out-of-range", 14, 23)]),
    "a temporary read at another index in its loop": (
        "c", "    for i in 1 .. 3 { let z[i] = x[i]\n      gf[i] := z[i - 1] }\n",
        [("loop-carried-dependence", 15, 16)]),
    "a temporary summed in its loop": (
        "c", "    for i in 0 .. 3 { let z[i] = x[i]\n      gf[i] := sum j in 0 .. 3 of z[j] }\n",
        [("loop-carried-dependence", 15, 35)]),
    "a temporary read before its let": (
        "c", "    for i in 0 .. 3 { gf[i] := z[i]\n      let z[i] = x[i] }\n", [("temporary-unwritten", 14, 32)]),
    "a temporary read after its block": (
        "c", "    for t in 0 .. 2 { for i in 0 .. 3 { let z[i] = x[i] } }\n    gf[0] := z[0]\n",
        [("temporary-unwritten", 15, 14)]),
    "a temporary read outside its loop's range": (
        "c", "    for i in 1 .. 3 { let z[i] = x[i] }\n    for j in 0 .. 3 { gf[j] := z[j] }\n",
        [("temporary-out-of-range", 15, 32)]),
    "a temporary written at an outer loop's index": (
        "c", "    for i in 0 .. 2 { for j in 0 .. 3 { let z[i] = x[j] } }\n", [("invalid-index", 14, 47)]),
    "a temporary outside any loop": ("c", "    let z[0] = y\n", [("invalid-index", 14, 11)]),
    "a temporary at a shifted index": ("c", "    for i in 0 .. 2 { let z[i + 1] = y }\n",
                                       [("invalid-index", 14, 29)]),
    "a temporary assigned": ("c", "    for i in 0 .. 2 { let z[i] = y }\n    z[0] := y\n",
                             [("type-mismatch", 15, 5)]),
    "a temporary without index": ("c", "    for i in 0 .. 2 { let z[i] = y }\n    gf[0] := z\n",
                                  [("type-mismatch", 15, 14)]),
    "a temporary named twice": ("c", "    for t in 0 .. 1 { for i in 0 .. 2 { let z[i] = y } }\n"
                                     "    for t in 0 .. 1 { for i in 0 .. 2 { let z[i] = y } }\n",
                                [("duplicate-definition", 15, 41)]),
    "a contribution row read before it is written": (
        "c", "    for i in 0 .. 2 { let t = sum j in 0 .. 3 of g[i, j]\n      for j in 0 .. 3 { g[i, j] := t } }\n",
        [("slot-read-out-of-range", 14, 50)]),
    "a row written in part": (
        "c", "    for i in 0 .. 2 { for j in 0 .. 2 { g[i, j] := y }\n      gf[0] := sum j in 0 .. 3 of g[i, j] }\n",
        [("slot-read-out-of-range", 15, 35)]),
    "a row written by an empty loop": (
        "c", "    for i in 0 .. 2 { for j in 0 .. 0 { g[i, j] := y }\n      gf[0] := g[i, 0] }\n",
        [("slot-read-out-of-range", 15, 16)]),
    "the previous column in the loop over it": (
        "u", "    for i in 0 .. 2 { for j in 1 .. 3 { W[i, j] := W[i, j - 1] * 2.0 } }\n",
        [("loop-carried-dependence", 28, 52)]),
    "an index N - i": ("u", "    for i in 0 .. 2 { for j in 0 .. 3 { W[i, j] := W[1 - i, j] } }\n",
                       [("invalid-index", 28, 54)]),
    "a column summed in the loop over its rows": (
        "u", "    for i in 0 .. 2 { let t = sum r in 0 .. 2 of W[r, 0]\n      W[i, 0] := t }\n",
        [("loop-carried-dependence", 28, 50)]),
    "a transpose in place": ("u", "    for i in 0 .. 2 { for j in 0 .. 2 { W[i, j] := W[j, i] } }\n",
                             [("loop-carried-dependence", 28, 52)]),
    "a row rewritten by every outer iteration": (
        "u", "    for t in 0 .. 2 { for j in 0 .. 3 { W[0, j] := W[0, j] * 2.0 } }\n",
        [("loop-carried-dependence", 28, 52)]),
}


@pytest.mark.parametrize("case", list(MISUSES))
def test_each_misuse_is_a_located_diagnostic(tmp_path, case):
    where, body, want = MISUSES[case]
    text = in_contribution(body) if where == "c" else in_update(body)
    assert diagnostics(tmp_path, text) == want


ACCEPTED = {
    "a row summed after its loop wrote it": (
        "c", "    for i in 0 .. 2 { for j in 0 .. 3 { g[i, j] := y }\n      let t = sum j in 0 .. 3 of g[i, j]\n"
             "      g[i, 0] := t }\n"),
    "the whole matrix read after the nest": (
        "c", "    for i in 0 .. 2 { for j in 0 .. 3 { g[i, j] := y } }\n    gf[0] := sum q in 0 .. 6 of gf[q]\n"),
    "a diagonal": ("c", "    for i in 0 .. 2 { g[i, i] := W[i, i] }\n    for i in 0 .. 2 { g[i, 2] := y }\n"
                        "    for i in 0 .. 2 { g[1 - 1, i + 1 - 1] := y }\n"),
    "a row's slots rewritten in its iteration": (
        "c", "    for i in 0 .. 2 { g[i, 0] := y\n      g[i, 1] := g[i, 0] * 2.0\n      g[i, 2] := g[i, 1] }\n"),
    "a temporary of an inner loop read in its block": (
        "c", "    for t in 0 .. 2 { for i in 0 .. 3 { let z[i] = x[i] }\n      for i in 0 .. 3 { g[t, i] := z[i] } }\n"),
    "a step of the matrix": ("u", "    for i in 0 .. 2 { for j in 0 .. 3 { W[i, j] := W[i, j] - rate * g[i, j] } }\n"),
    "a row normalised by its own sum": (
        "u", "    for i in 0 .. 2 { let t = sum j in 0 .. 3 of W[i, j] * W[i, j]\n"
             "      for j in 0 .. 3 { W[i, j] := W[i, j] / sqrt(t) } }\n"),
    "the previous row of an outer loop of one iteration": (
        "u", "    for i in 1 .. 2 { for j in 0 .. 3 { W[i, j] := W[i - 1, j] * 2.0 } }\n"),
    "row norms as a temporary": (
        "u", "    for i in 0 .. 2 { let n2[i] = sum j in 0 .. 3 of W[i, j] * W[i, j] }\n"
             "    for i in 0 .. 2 { for j in 0 .. 3 { W[i, j] := W[i, j] / sqrt(n2[i]) } }\n"),
}


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_what_is_proven_is_accepted(tmp_path, case):
    where, body = ACCEPTED[case]
    assert diagnostics(tmp_path, in_contribution(body) if where == "c" else in_update(body)) == []


def test_the_temporaries_of_a_program_are_bounded(tmp_path):
    body = ("    view big = slot 0 .. 6\n" + "".join(
        f"    for i in 0 .. 40000 {{ let t{j}[i] = y }}\n" for j in range(2)))
    assert diagnostics(tmp_path, in_contribution(body)) == [("size-limit", 16, 27)]


# ----------------------------------------------------------------------------- the IR


def test_indices_keep_their_text_and_encoding():
    from alphac.plan.canon import expr_text, flat, program_lines

    assert flat(n.Index(3)) == ["(Index", 3, None, ")"]
    assert flat(n.Index(3, "i")) == ["(Index", 3, "i", ")"]
    assert (str(n.Index(3)), str(n.Index(3, "i"))) == ("3", "3+i")
    assert n.affine(3, [("i", 1)]) == n.Index(3, "i") and n.affine(3, []) == n.Index(3)
    two = n.affine(5, [("j", 1), ("i", 4)])
    assert two == n.affine(5, [("i", 4), ("j", 1)]) == n.Index(5, None, (("i", 4), ("j", 1)))
    assert str(two) == "5+4*i+j"
    # the terms take part in the identity
    assert flat(two) == ["(Index", 5, None, "[", "[", "i", 4, "]", "[", "j", 1, "]", "]", ")"]
    assert two.bounds({"i": (0, 3), "j": (0, 4)}) == (5, 17)
    p = n.Program(20, (n.Loop("i", 0, 3, (
        n.VectorLet("z", "i", 0, 3, n.SlotRef(two)),
        n.Assign(n.Index(17, "i"), n.VectorLocal("z", n.Index(0, "i")))))
    ,))
    assert program_lines(p) == ["for i in 0 .. 3 {", "  let z[i] = slot 5+4*i+j",
                                "  slot 17+i := z[0+i]", "}"]
    assert expr_text(n.VectorLocal("z", n.Index(2))) == "z[2]"
    assert n.temporary_words(p) == 3


def test_existing_specs_keep_their_protocol_identity():
    """Indexed specs written before matrices lower to the same IR encoding: no field of an
    index or a statement they use changed."""
    from alphac import driver
    from alphac.plan.canon import flat

    dep = driver.deployment(str(ROOT / "specs" / "indexed_lsq.alpha"))
    tokens = flat(dep.learner.contribution) + flat(dep.learner.update)
    index_fields = [tokens[i + 1:i + 4] for i, t in enumerate(tokens) if t == "(Index"]
    assert index_fields and all(f[2] == ")" for f in index_fields)  # base, var, close: nothing more


# ----------------------------------------------------------------------------- memory


def test_the_plan_counts_the_vector_temporaries_as_scratch(tmp_path):
    from alphac import driver
    from alphac.plan.memory import temporaries

    dep = deployment(tmp_path)
    plan = driver.plan(dep)
    from alphac.ir.lanes import LANES, lanes_ok

    temps = temporaries(dep.learner.contribution, dep.learner.update)
    assert temps == 3 * H  # z, a and e; the update has none
    # on a CPU the contribution runs over LANES samples at once: each temporary holds LANES
    assert lanes_ok(dep.learner.contribution, dep.learner.k, dep.learner.s, "binary64")
    assert temporaries(dep.learner.contribution, dep.learner.update, True) == LANES * 3 * H
    for o, owner in enumerate(plan.owners):
        share = dep.learner.samples.shares[o]
        held = temps * (1 if dep.placement[o] == "sm86" else LANES)
        assert owner.bytes.scratch == 8 * ((K if share >= 2 else 0) + held)
        assert owner.peak_bytes == (owner.persistent_bytes + owner.bytes.replica + owner.bytes.registers
                                    + owner.bytes.scratch)


needs_qemu = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v qemu-aarch64 && command -v aarch64-linux-gnu-gcc"],
                   capture_output=True).returncode != 0,
    reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")


@needs_qemu
def test_the_executables_count_what_the_plan_counts(tmp_path):
    from test_memory import assert_measured_is_the_law

    import dataclasses

    dep = dataclasses.replace(load_deployment(str(TANH)), updates=2)
    assert_measured_is_the_law("mem-tanh-network", dep)


# ----------------------------------------------------------------------------- the tanh network


def floats(words) -> np.ndarray:
    return np.asarray(words, dtype=np.uint64).view(np.float64)


@needs_qemu
def test_the_tanh_network_launches_equal_to_the_oracle(tmp_path):
    from click.testing import CliRunner

    from alphac.commands import main

    out = CliRunner().invoke(main, ["launch", str(TANH), "-o", str(tmp_path / "out"), "--quiet"])
    assert out.exit_code == 0, out.output
    assert [ln.split()[-1] for ln in out.stdout.splitlines()[1:5]] == ["match"] * 4


@needs_qemu
def test_the_tanh_network_resumes_on_the_other_instruction_set(tmp_path):
    """Checkpointed every 2 updates, its ckpt-4 resumes with every owner on the other
    instruction set and ends with the uninterrupted run's words."""
    import dataclasses

    from shape_gates import resume_across_instruction_sets

    dep = dataclasses.replace(load_deployment(str(TANH)), checkpoint=n.Checkpoint(2, "ckpt-tanh"))
    resume_across_instruction_sets(tmp_path, "tanh-network", dep, 4)


def test_the_tanh_network_partitions_by_coordinate():
    """Its update is Adam over every parameter alike: the moments partition by coordinate,
    the two bias corrections are shared."""
    import dataclasses

    from alphac import driver

    dep = load_deployment(str(TANH))
    k = dep.learner.k
    part = n.Partitioning(n.Shard(), n.Shard(), n.Shard(), 2, (2 * k, 2 * k + 1))
    plan = driver.plan(dataclasses.replace(dep, partitioning=part))
    assert len(plan.owners) == 4


@needs_qemu
def test_the_tanh_network_launches_partitioned_equal_to_the_oracle(tmp_path):
    """Parameters, gradients and Adam's moments partitioned by coordinate over the four
    mixed owners (the bias corrections shared): the oracle's words."""
    import dataclasses

    from alphac import driver
    from alphac.launch.launcher import launch

    dep = load_deployment(str(TANH))
    k = dep.learner.k
    part = n.Partitioning(n.Shard(), n.Shard(), n.Shard(), 2, (2 * k, 2 * k + 1))
    dep = dataclasses.replace(dep, partitioning=part)
    report = launch(dep, tmp_path / "out", plan=driver.plan(dep))
    assert report.match, report.failures


def test_the_tanh_network_follows_an_independent_numpy_learner():
    """numpy, full batch and in matrix form (its own order, the platform's tanh): the mean
    gradient of half the squared residual, then Adam; alphac's parameters agree to 1e-9
    (Adam divides by the root of the second moment, which magnifies the last bits of small
    gradients) and the mean loss to 1e-12 relative after every update, and the loss falls."""
    dep = load_deployment(str(TANH))
    L = dep.learner
    h, d = 32, 3
    data = floats(L.samples.words).reshape(-1, L.s)
    X, Y = data[:, :d], data[:, d]
    rate = float(floats([L.rate])[0])

    def unpack(w):
        return w[:h * d].reshape(h, d), w[h * d:h * d + h], w[h * d + h:h * d + 2 * h], w[-1]

    def loss(w):
        W, b, v, c = unpack(w)
        return float(np.mean(0.5 * (np.tanh(X @ W.T + b) @ v + c - Y) ** 2))

    w = floats(L.initial.as_array()).copy()
    m, u = np.zeros_like(w), np.zeros_like(w)
    losses = [loss(w)]
    for t in range(1, dep.updates + 1):
        W, b, v, c = unpack(w)
        a = np.tanh(X @ W.T + b)
        r = a @ v + c - Y
        e = (r[:, None] * v[None, :]) * (1.0 - a * a)
        g = np.concatenate([(e[:, :, None] * X[:, None, :]).reshape(len(X), -1).mean(axis=0),
                            e.mean(axis=0), (r[:, None] * a).mean(axis=0), [r.mean()]])
        m = 0.9 * m + 0.1 * g
        u = 0.999 * u + 0.001 * g * g
        w = w - rate * (m / (1 - 0.9 ** t)) / (np.sqrt(u / (1 - 0.999 ** t)) + 1e-8)
        ours = floats(evaluate(dep, t).params)
        assert np.allclose(ours, w, rtol=1e-9, atol=1e-12), t
        assert abs(loss(ours) - loss(w)) <= 1e-12 * loss(w), t
        losses.append(loss(ours))
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.9 * losses[0]
