"""The elementary functions of programs (exp, log, log1p, expm1 correctly rounded; sigmoid
and tanh declared algorithms): the emitted kernels give the oracle's words (mpmath, rounded
once) on random and boundary arguments, the same words on x86-64 and AArch64 (under qemu),
call no library function on any target (the objects' relocations and the PTX), and the
language's pow, misuses and refusals."""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import numpy as np
import pytest
from llvmlite import ir

from alphac.codegen import elementary as el
from alphac.codegen.elementary.vector import _counted_loop as counted_loop
from alphac.ir.words import to_bits
from alphac.oracle import elementary as ref
from alphac.targets import compile_object, load_target

HAVE_AARCH64 = shutil.which("aarch64-linux-gnu-gcc") is not None and shutil.which("qemu-aarch64") is not None


def words(a) -> list[int]:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64).tolist()


def arguments(name: str, n: int = 1500, seed: int = 7) -> np.ndarray:
    """Random arguments over the function's domain, its boundary regions and a few exact
    points; the same for every run."""
    rng = np.random.default_rng(seed)
    tiny = np.ldexp(1.0, -np.arange(40, 1075, 37))
    edges = {
        "exp": [-745.1332191019411, -745.1332191019412, -744.44, -708.3964185322641,
                -708.39, 709.782712893384, 709.7827128933841, 0.0, -0.0, 2.0 ** -54, -2.0 ** -54,
                2.0 ** -53, -2.0 ** -53, 1.0, -1.0],
        "log": [5e-324, 2.0 ** -1022, 1.0, 1.0 + 2.0 ** -52, 1.0 - 2.0 ** -53, 2.0, 0.5,
                1.7976931348623157e308, math.e],
        "log1p": [0.0, -0.0, -0.5, -1.0 + 2.0 ** -53, 2.0 ** -54, -2.0 ** -54, 2.0 ** 52, 2.0 ** 180,
                  2.0 ** 181, 1.7976931348623157e308],
        "expm1": [0.0, -0.0, -38.0, -37.99, 709.78, 2.0 ** -54, -2.0 ** -54, 1e-10, -1e-10],
        "sigmoid": [0.0, -0.0, -745.0, -800.0, 36.0, 40.0, 1e-300],
        "tanh": [0.0, -0.0, 20.0, -20.0, 19.999, 1e-300, -1e-8, 1e308],
    }[name]
    if name == "exp":
        body = [rng.uniform(-746, 710, n), rng.uniform(-1, 1, n // 3), -tiny, tiny]
    elif name == "log":
        body = [np.exp(rng.uniform(-744, 709, n)), rng.uniform(0.99, 1.01, n // 3), tiny]
    elif name == "log1p":
        body = [rng.uniform(-1, 4, n), np.exp(rng.uniform(-40, 700, n // 3)), -tiny, tiny]
    elif name == "expm1":
        body = [rng.uniform(-40, 709, n), rng.uniform(-1e-3, 1e-3, n // 3), tiny, -tiny]
    else:
        body = [rng.uniform(-40, 40, n), rng.uniform(-1e-3, 1e-3, n // 3), tiny, -tiny]
    return np.concatenate([np.asarray(edges, dtype=np.float64)] + body)


@pytest.mark.parametrize("name", el.FUNCTIONS)
def test_the_host_kernel_gives_the_oracles_words(name):
    xs = arguments(name)
    got = el.host(name)(xs)
    want = [ref.evaluate(name, float(x)) for x in xs]
    bad = [(x.hex(), g, w) for x, g, w in zip(xs.tolist(), got.tolist(), want)
           if to_bits(g) != to_bits(w)]
    assert bad == [], bad[:5]


def test_exact_points_signed_zeros_and_the_ends_of_the_range():
    f = {name: el.host(name) for name in el.FUNCTIONS}

    def one(name, x):
        return f[name](np.array([x]))[0]

    assert words([one("exp", 0.0), one("log", 1.0), one("expm1", -0.0), one("log1p", -0.0),
                  one("tanh", -0.0), one("sigmoid", 0.0)]) == words([1.0, 0.0, -0.0, -0.0, -0.0, 0.5])
    assert one("exp", 710.0) == math.inf and one("exp", -746.0) == 0.0
    assert one("exp", -745.1332191019411) == 5e-324  # the smallest subnormal, rounded once
    assert math.isnan(one("log", -1.0)) and one("log", 0.0) == -math.inf
    assert one("log1p", -1.0) == -math.inf and math.isnan(one("log1p", -2.0))
    assert one("expm1", -50.0) == -1.0 and one("tanh", 1e308) == 1.0
    assert one("exp", 1.0) == 2.718281828459045 and one("log", 2.0) == 0.6931471805599453


@pytest.mark.skipif(not HAVE_AARCH64, reason="the AArch64 cross compiler or qemu-aarch64 is missing")
def test_aarch64_gives_the_same_words_as_x86_64():
    xs = np.concatenate([arguments("exp", 600), arguments("log", 600), arguments("log1p", 600)])
    from alphac.qualify.conform import on_target

    arm = on_target("aarch64")
    for name in el.FUNCTIONS:
        a = np.abs(xs) if name == "log" else (np.abs(xs) - 0.5 if name == "log1p" else xs)
        assert words(arm(name, a)) == words(el.host(name)(a)), name


def _objects(target):
    module = el.vector_module()
    return compile_object(module, load_target(target))


@pytest.mark.parametrize("target,objdump", [("x86_64", "objdump"), ("aarch64", "aarch64-linux-gnu-objdump")])
def test_no_library_function_is_called_on_either_instruction_set(tmp_path, target, objdump):
    if shutil.which(objdump) is None:
        pytest.skip(f"{objdump} not installed")
    obj = tmp_path / "elementary.o"
    obj.write_bytes(_objects(target))
    relocs = subprocess.run([objdump, "-r", str(obj)], capture_output=True, text=True, check=True).stdout
    symbols = {ln.split()[2].split("+")[0].split("-")[0] for ln in relocs.splitlines()
               if ln[:1] in "0123456789abcdef" and len(ln.split()) >= 3}
    external = {s for s in symbols if not s.startswith(".") and not s.startswith("alphac_")}
    assert external == set(), external  # no exp, log, __ieee754_*, no compiler-rt helper
    text = subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    mnemonics = [ln.split("\t")[2].split()[0] for ln in text.splitlines() if ln.count("\t") >= 2]
    fused = [m for m in mnemonics if "fma" in m or "fmadd" in m or "fmsub" in m or "fnmadd" in m
             or "fnmsub" in m or m.startswith("fmla") or m.startswith("fmls")]
    assert fused == []
    assert any("mul" in m for m in mnemonics)


def test_the_device_code_calls_nothing_and_fuses_nothing(tmp_path):
    from alphac.targets import llvm as tl

    module = ir.Module("elementary")
    for name in el.FUNCTIONS:
        fn = el.define(module, name)
        fn.linkage = "external"  # keep every one in the PTX
    ptx = tl.compile_assembly(module, load_target("sm86"))
    calls = set(re.findall(r"^\s*call(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)", ptx, re.M))
    assert "alphac_exp_accurate" in calls  # the pattern finds the calls there are
    assert {c for c in calls if not c.startswith("alphac_")} == set(), calls
    assert "__nv_" not in ptx and "fma" not in ptx
    if shutil.which("ptxas"):
        (tmp_path / "e.ptx").write_text(ptx)
        subprocess.run(["ptxas", "-arch=sm_86", "--fmad=false", str(tmp_path / "e.ptx"), "-o",
                        str(tmp_path / "e.cubin")], check=True, capture_output=True)


def test_the_declared_algorithms_are_the_documented_steps():
    """sigmoid and tanh of the kernels are the steps of docs/language.md, in binary64: the
    same words as those steps computed here with the oracle's exp and expm1."""
    xs = arguments("tanh", 400)
    for x, s, t in zip(xs.tolist(), el.host("sigmoid")(xs).tolist(), el.host("tanh")(xs).tolist()):
        e = ref.correctly_rounded("exp", -abs(x))
        assert to_bits(s) == to_bits((1.0 if x >= 0 else e) / (1.0 + e))
        a = min(abs(x), 20.0)
        m = ref.correctly_rounded("expm1", -2.0 * a)
        assert to_bits(t) == to_bits(math.copysign(-m / (m + 2.0), x))


# ----------------------------------------------------------------------------- in programs

from click.testing import CliRunner  # noqa: E402

from alphac.commands import main  # noqa: E402
from alphac.ir import nodes as n  # noqa: E402
from alphac.ir.builders import S, assign  # noqa: E402
from alphac.oracle.refusal import Site  # noqa: E402
from alphac.oracle.scalar import run_program  # noqa: E402
from alphac.oracle.vector import Flagged, SlotStore  # noqa: E402
from alphac.oracle.vector import run_program as run_vector  # noqa: E402

K = 6  # x at [0, 6), results at [6, 12)


def looped(op: str) -> n.Program:
    return n.Program(2 * K, (n.Loop("i", 0, K, (assign(K, n.Unary(op, S(0, "i")), "i", "r[i]"),)),))


@pytest.mark.parametrize("op", el.FUNCTIONS)
def test_the_engines_and_the_kernel_agree_in_a_program(tmp_path, op):
    from test_codegen_program import Kernel

    xs = np.array([0.5, -1.25, 3.0, 1e-300, 7.5, 0.001]) if op != "log1p" else \
        np.array([0.5, -0.25, 3.0, 1e-300, 7.5, -0.999])
    slots = np.concatenate([np.abs(xs) if op == "log" else xs, np.zeros(K)])
    p = looped(op)
    want = [ref.evaluate(op, float(x)) for x in slots[:K]]
    scalar = run_program(p, slots.tolist(), Site(0, "contribution"))[K:]
    vector = run_vector(p, SlotStore([(0, slots.reshape(-1, 1).copy())])).rows(K, 2 * K)[:, 0]
    status, _, out = Kernel(tmp_path, p, [(0, K), (K, K)], f"el_{op}")(slots)
    assert status == 0
    assert words(scalar) == words(want) == words(vector) == words(out[K:])


@pytest.mark.parametrize("op,bad", [("exp", 710.0), ("log", -1.0), ("log", 0.0), ("log1p", -1.0),
                                    ("exp", -math.inf), ("tanh", math.inf), ("sigmoid", math.nan)])
def test_a_non_finite_result_or_an_absorbed_operand_refuses(tmp_path, op, bad):
    """exp(710) and log(0) are not finite; exp(-inf) = 0 and tanh(inf) = 1 are, but their
    operand is not: each refuses at coordinate 3, in the oracle and in the chunked kernel."""
    from test_codegen_program import Kernel

    slots = np.array([0.5, 0.25, 2.0, bad, 1.0, 0.5] + [0.0] * K)
    p = looped(op)
    with pytest.raises(Exception) as refused:
        run_program(p, slots.tolist(), Site(0, "contribution"))
    assert getattr(refused.value, "code", None) == "non-finite"
    assert "i=3" in str(refused.value.detail)
    with pytest.raises(Flagged):
        run_vector(p, SlotStore([(0, slots.reshape(-1, 1).copy())]))
    status, coord, _ = Kernel(tmp_path, p, [(0, K), (K, K)], f"bad_{op}")(slots)
    assert (status, coord) == (1, 3)


POW_SPEC = """\
import Learning.Deployment

value learner : (family DataParallelSystem 4 3) = DataParallelSystemOf {{
  dataParallelParameterCount = 1,
  dataParallelSampleWidth = 2,
  dataParallelContribution = pointwise {{
    view w = slot 0
    view x = slot 1
    view y = slot 2
    view g = slot 3
    let t = w * x - y
    g := {contribution}
  }},
  dataParallelUpdate = [slot 0 := slot 0 - slot 2 * slot 1],
  dataParallelInitial = [0.5],
  dataParallelInitialState = [],
  dataParallelRate = 0.01,
  dataParallelSamples = [[[1.5, 2.5]]],
}}

value run : Deployment = DeploymentOf {{
  deploymentLearner = learner,
  deploymentOwners = 1,
  deploymentTopology = DataParallelStar,
  deploymentPartitioning = DataParallelReplicated,
  deploymentRoles = [RoleOf {{ roleName = "coordinator", roleOwners = [0] }}],
  deploymentPlacement = [TargetX86_64],
  deploymentUpdates = 2,
  deploymentContract = binary64Exact,
  deploymentCheckpoint = CheckpointNever,
}}
"""


def lowered(tmp_path, contribution: str):
    path = tmp_path / "pow.alpha"
    path.write_text(POW_SPEC.format(contribution=contribution))
    return path


def test_pow_is_the_left_to_right_product_and_its_reciprocal(tmp_path):
    from alphac import driver
    from alphac.plan.canon import program_lines

    texts = {}
    for src in ("pow(t, 3)", "(t * t) * t", "pow(t, -2)", "1.0 / (t * t)", "pow(t, 1)", "t"):
        texts[src] = program_lines(driver.deployment(str(lowered(tmp_path, src))).learner.contribution)
    # the same program, so the same protocol: pow adds no operation of its own
    assert texts["pow(t, 3)"] == texts["(t * t) * t"]
    assert texts["pow(t, -2)"] == texts["1.0 / (t * t)"]
    assert texts["pow(t, 1)"] == texts["t"]


@pytest.mark.parametrize("src,code", [("pow(t, 0)", "pow-exponent"), ("pow(t, 65)", "pow-exponent"),
                                      ("pow(t, t)", "pow-exponent"), ("pow(t, 2.0)", "pow-exponent"),
                                      ("exp(t, t)", "wrong-arity"), ("expp(t)", "unknown-name")])
def test_misused_functions_are_located_diagnostics(tmp_path, src, code):
    out = CliRunner().invoke(main, ["check", str(lowered(tmp_path, src))])
    assert out.exit_code == 1
    assert f"error[{code}]" in out.stderr.splitlines()[0], out.stderr
    assert ":12:" in out.stderr.splitlines()[0]


def test_the_level_is_part_of_the_protocol_identity():
    from alphac.plan.canon import expr_text

    assert expr_text(n.Unary("exp", S(0))) == "exp.correctly-rounded(slot 0)"
    assert expr_text(n.Unary("tanh", S(0))) == "tanh.declared-1(slot 0)"


# ----------------------------------------------------------------------------- in the chunked loop

CHUNKED = 1100  # coordinates: x at [0, 1100), results at [1100, 2200), over three chunks


def _fast_phase(tmp_path, name: str):
    """`alphac_NAME_fast` over an array (NaN where its rounding test cannot decide)."""
    import ctypes

    module = ir.Module("probe")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 2 + [ir.IntType(64)]),
                     "probe")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    xs, ys, count = fn.args

    def one(i):
        x = b.load(b.gep(xs, [i], source_etype=ir.DoubleType()), typ=ir.DoubleType())
        b.store(b.call(el.define_fast(module, name), [x]), b.gep(ys, [i], source_etype=ir.DoubleType()))

    counted_loop(fn, b, count, one)
    b.ret_void()
    obj = tmp_path / f"probe_{name}.o"
    obj.write_bytes(compile_object(module, "x86_64"))
    subprocess.run(["cc", "-shared", "-o", str(obj.with_suffix(".so")), str(obj)], check=True)
    cfn = ctypes.CDLL(str(obj.with_suffix(".so"))).probe

    def run(x):
        x = np.ascontiguousarray(x, dtype=np.float64)
        y = np.empty_like(x)
        cfn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int64(x.size))
        return y

    return run


def _undecided(tmp_path, name: str, count: int) -> np.ndarray:
    """`count` arguments inside the fast phase's domain where its rounding test fails."""
    rng = np.random.default_rng(3)
    xs = rng.uniform(0.01, 4.0, 200_000) if name in ("log", "log1p") else rng.uniform(-4.0, 4.0, 200_000)
    got = xs[np.isnan(_fast_phase(tmp_path, name)(xs))]
    assert got.size >= count, (name, got.size)
    return got[:count]


def chunked(op: str, wrap=None) -> n.Program:
    value = n.Unary(op, S(0, "i"))
    return n.Program(2 * CHUNKED, (n.Loop("i", 0, CHUNKED, (
        assign(CHUNKED, wrap(value) if wrap else value, "i", "r[i]"),)),))


@pytest.mark.parametrize("op", el.FUNCTIONS)
def test_an_undecided_fast_phase_in_a_chunk_gives_the_whole_functions_word(tmp_path, op):
    """The chunked loop calls the branch-free fast phase; where its rounding test cannot
    decide (NaN), the coordinate is rerun with the whole function: the oracle's word, no
    refusal. Also where the NaN meets an operation that would absorb it (min and max pass
    on their other operand for one sign of NaN each)."""
    from alphac.codegen import program as prog
    from test_codegen_program import C, Kernel

    hard = _undecided(tmp_path, op, 12)
    rng = np.random.default_rng(4)
    xs = rng.uniform(0.01, 4.0, CHUNKED) if op in ("log", "log1p") else rng.uniform(-4.0, 4.0, CHUNKED)
    where = [0, 1, 2, 511, 512, 700, 701, 1023, 1024, 1097, 1098, 1099]
    xs[where] = hard
    slots = np.concatenate([xs, np.zeros(CHUNKED)])
    want = [ref.evaluate(op, float(x)) for x in xs]
    for t, wrap in enumerate([None, lambda v: n.Binary("max", v, C(-1e300)),
                              lambda v: n.Binary("min", v, C(1e300))]):
        p = chunked(op, wrap)
        assert prog.fast_loop_ok(p.body[0])
        kern = Kernel(tmp_path, p, [(0, CHUNKED), (CHUNKED, CHUNKED)], f"hard_{op}_{t}")
        status, coord, out = kern(slots)
        assert (status, coord) == (0, -7)
        assert words(out[CHUNKED:]) == words(want)


@pytest.mark.parametrize("op,bad", [("exp", 710.0), ("log", -1.0), ("log1p", -1.0), ("exp", -math.inf),
                                    ("tanh", math.nan)])
def test_a_refusal_among_undecided_coordinates_names_its_own(tmp_path, op, bad):
    """Undecided coordinates before and after a genuinely non-finite one in the same chunk:
    the refusal names the non-finite one's coordinate (the undecided ones are no refusal),
    also when it lies in a later chunk than some of them."""
    from test_codegen_program import Kernel

    hard = _undecided(tmp_path, op, 4)
    kern = Kernel(tmp_path, chunked(op), [(0, CHUNKED), (CHUNKED, CHUNKED)], f"mixed_{op}")
    for at in (600, 1099):
        xs = np.full(CHUNKED, 0.5)
        xs[[3, 590, 599, 1060]] = hard
        xs[at] = bad
        status, coord, _ = kern(np.concatenate([xs, np.zeros(CHUNKED)]))
        assert (status, coord) == (1, at)


def test_the_chunked_loop_calls_the_fast_phases_and_nothing_outside(tmp_path):
    """The chunked loop's calls are the fast phases (the scalar lowering's the whole
    functions), and its vectorised object refers to no symbol outside the module, at the
    baseline and at a level with wide vectors."""
    from dataclasses import replace

    from alphac.codegen.program import emit_program

    module = ir.Module("chunked")
    body = tuple(assign(CHUNKED, n.Unary(op, S(0, "i")), "i", f"r{j}[i]") for j, op in enumerate(el.FUNCTIONS))
    emit_program(module, n.Program(2 * CHUNKED, (n.Loop("i", 0, CHUNKED, body),)), "kern",
                 [(0, CHUNKED), (CHUNKED, CHUNKED)])
    text = str(module)
    for op in el.FUNCTIONS:
        assert f'call double @"alphac_{op}_fast"(' in text and f'call double @"alphac_{op}"(' in text
    if shutil.which("objdump") is None:
        pytest.skip("objdump not installed")
    for cpu in (None, "skylake-avx512"):
        t = load_target("x86_64")
        obj = tmp_path / f"chunked_{cpu}.o"
        obj.write_bytes(compile_object(module, replace(t, cpu=cpu) if cpu else t))
        relocs = subprocess.run(["objdump", "-r", str(obj)], capture_output=True, text=True,
                                check=True).stdout
        symbols = {ln.split()[2].split("+")[0].split("-")[0] for ln in relocs.splitlines()
                   if ln[:1] in "0123456789abcdef" and len(ln.split()) >= 3}
        assert {s for s in symbols if not s.startswith(".") and not s.startswith("alphac_")
                and not s.startswith("kern")} == set(), (cpu, symbols)


def test_expm1s_fast_phase_decides_below_minus_38(tmp_path):
    """Below -38 expm1 is -1 (its special case): the fast phase says so too, rather than
    leave it to the second pass, and so tanh's fast phase decides every |x| > 19 (its
    min(|x|, 20) gives expm1 arguments down to -40)."""
    xs = np.array([-38.0 - 2.0 ** -47, -39.0, -40.0, -745.5, -1e308])
    assert words(_fast_phase(tmp_path, "expm1")(xs)) == words([-1.0] * 5) == words(el.host("expm1")(xs))
    big = np.array([19.0 + 2.0 ** -40, -19.5, 20.0, -20.0, 33.0, 1e308])
    got = _fast_phase(tmp_path, "tanh")(big)
    assert words(got) == words(el.host("tanh")(big)) == words([ref.evaluate("tanh", float(x)) for x in big])


@pytest.mark.parametrize("op", ["exp", "tanh"])
def test_an_undecided_coordinate_of_an_in_place_update_is_rerun_from_its_old_word(tmp_path, op):
    """x[i] := op(x[i]) writes the view it reads: an undecided coordinate gets its old word
    back before its rerun, so the rerun computes op of the argument, not of the NaN."""
    from alphac.codegen import program as prog
    from test_codegen_program import Kernel

    p = n.Program(CHUNKED, (n.Loop("i", 0, CHUNKED, (assign(0, n.Unary(op, S(0, "i")), "i", "x[i]"),)),))
    assert prog.fast_loop_ok(p.body[0]) and prog._reads_old(p.body[0], [0]) == [0]
    xs = np.random.default_rng(6).uniform(-4.0, 4.0, CHUNKED)
    xs[[5, 6, 600, 1099]] = _undecided(tmp_path, op, 4)
    status, coord, out = Kernel(tmp_path, p, [(0, CHUNKED)], f"inplace_{op}")(xs)
    assert (status, coord) == (0, -7)
    assert words(out) == words([ref.evaluate(op, float(x)) for x in xs])
