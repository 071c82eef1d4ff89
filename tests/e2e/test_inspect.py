"""The `.alphac` section: embedded at build time, read back by `alphac inspect`."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from llvmlite import ir

from alphac.commands import main
from alphac.image.metadata import encode
from alphac.targets.elf import SECTION, describe, read_metadata
from alphac.ir import nodes as n
from alphac.targets import compile_object, link_bytes, load_target
from alphac.targets.runtime import data_object
from alphac.targets.target import TargetError
from alphac.ir.words import to_bits as word

X86 = load_target("x86_64")
HAVE_AARCH64 = shutil.which("aarch64-linux-gnu-gcc") is not None


def small_deployment(topology=None, placement=("x86_64", "aarch64", "x86_64", "aarch64"),
                     stem="lsq_small") -> n.Deployment:
    """Four owners, plain least-squares steps (k=2, s=3), per-slot programs, built as IR."""
    S = lambda i: n.SlotRef(n.Index(i))  # noqa: E731
    B = n.Binary
    r = B("sub", B("add", B("mul", S(0), S(2)), B("mul", S(1), S(3))), S(4))
    contribution = n.Program(7, (n.Assign(n.Index(5), B("mul", r, S(2)), label="c[0]"),
                                 n.Assign(n.Index(6), B("mul", r, S(3)), label="c[1]")))
    update = n.Program(5, (n.Assign(n.Index(0), B("sub", S(0), B("mul", S(4), S(2))), label="w[0]"),
                           n.Assign(n.Index(1), B("sub", S(1), B("mul", S(4), S(3))), label="w[1]")))
    rng = np.random.default_rng(3)
    data = np.array([word(v) for v in rng.normal(size=18)], dtype=np.uint64).reshape(6, 3)
    learner = n.Learner("lsq", 2, 3, 0, contribution, update, n.Words((word(0.5), word(-0.25))),
                        n.Words(()), word(0.1), n.Samples(3, (1, 2, 3, 0), data))
    roles = (n.Role("coordinator", (0,)), n.Role("worker", (1, 2, 3)))
    return n.Deployment(f"run_{stem}", learner, 4, topology or n.Star(), n.Partitioning(), roles,
                        tuple(placement), 5, n.Contract(), n.Checkpoint(),
                        source_file=f"specs/{stem}.alpha")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from alphac.driver import build as build_executable
    from alphac.plan import plan

    out = tmp_path_factory.mktemp("inspect")
    star = plan(small_deployment())
    hier = plan(small_deployment(topology=n.Hierarchy(2), stem="lsq_small_h"))
    exes = {("star", "worker", "x86_64"): build_executable(star, "worker", "x86_64", out),
            ("hier", "coordinator", "x86_64"): build_executable(hier, "coordinator", "x86_64", out)}
    if HAVE_AARCH64:
        exes[("star", "worker", "aarch64")] = build_executable(star, "worker", "aarch64", out)
    return star, hier, exes


def test_inspect_json_of_a_built_executable(built):
    star, hier, exes = built
    exe = exes[("star", "worker", "x86_64")]
    result = CliRunner().invoke(main, ["inspect", str(exe), "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert got["machine"] == "EM_X86_64" and got["linking"] == "dynamic" and got["static"] is False
    assert got["size"] == exe.stat().st_size
    assert exe.name == "lsq_small-worker-x86_64"
    assert (got["format"], got["ok"], got["kind"]) == ("alphac-inspect-1", True, "executable")
    assert {k: got[k] for k in ("metadata_format", "spec", "deployment", "role", "role_owners",
                                "target", "triple", "owners", "topology", "protocol", "placement",
                                "updates")} == {
        "metadata_format": 1, "spec": "lsq_small", "deployment": "run_lsq_small", "role": "worker",
        "role_owners": [1, 2, 3], "target": "x86_64", "triple": "x86_64-unknown-linux-gnu",
        "owners": 4, "topology": "star", "protocol": star.protocol_hex,
        "placement": ["x86_64", "aarch64", "x86_64", "aarch64"], "updates": 5}
    assert got["cpu"] == {"level": "baseline", "llvm_cpu": "x86-64", "features": "", "requires": []}
    assert got["contract"] == {"format": "binary64", "rounding": "nearest-even",
                               "subnormals": "preserve", "exceptional": "finite-or-refuse",
                               "relation": "exact", "order_digest": star.contract.order_digest,
                               "operations": len(star.contract.ops)}


def test_star_and_hierarchy_builds_record_their_own_protocol(built):
    star, hier, exes = built
    h = read_metadata(exes[("hier", "coordinator", "x86_64")])
    assert (h["topology"], h["role"], h["role_owners"]) == ("hierarchy:2", "coordinator", [0])
    assert h["protocol"] == hier.protocol_hex != star.protocol_hex
    assert h["contract"]["order_digest"] != star.contract.order_digest


@pytest.mark.skipif(not HAVE_AARCH64, reason="aarch64 cross tools not installed")
def test_inspect_text_of_an_aarch64_executable(built):
    star, _, exes = built
    exe = exes[("star", "worker", "aarch64")]
    result = CliRunner().invoke(main, ["inspect", str(exe)])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[1] == (f"machine     EM_AARCH64 (aarch64-unknown-linux-gnu), static, "
                        f"{exe.stat().st_size} bytes")
    assert lines[3] == "role        worker: owners 1, 2, 3 of 4"
    assert lines[5] == "cpu         baseline (LLVM cpu generic); checks at startup: nothing above the baseline"
    assert lines[7] == f"protocol    {star.protocol_hex}"
    assert describe(exe)["static"] is True


def _exe_with_section(tmp_path, payload: bytes | None):
    """An executable of an empty `main`, with `payload` as its `.alphac` section (linked in
    as data, as a build does), or without the section."""
    m = ir.Module("t")
    i32 = ir.IntType(32)
    f = ir.Function(m, ir.FunctionType(i32, []), "main")
    ir.IRBuilder(f.append_basic_block()).ret(ir.Constant(i32, 0))
    extra = () if payload is None else (data_object(X86, {"alphac_metadata": (payload, SECTION)}, tmp_path),)
    return link_bytes(compile_object(m, "x86_64"), "x86_64", tmp_path / "exe", extra)


def test_embedded_dict_round_trips_byte_for_byte(tmp_path):
    meta = {"format": 1, "role": "wörker", "b": [1, 2], "a": {"z": 1, "y": None}}
    exe = _exe_with_section(tmp_path, encode(meta))
    assert read_metadata(exe) == meta
    assert encode(meta) == b'{"a":{"y":null,"z":1},"b":[1,2],"format":1,"role":"w\xc3\xb6rker"}'
    assert exe.read_bytes().count(encode(meta)) == 1


@pytest.mark.parametrize("payload,code,tail", [
    (None, "not-an-alphac-executable", "no .alphac section"),
    (b"{not json", "bad-metadata", ".alphac is not JSON"),
    (b'{"format": 2}', "bad-metadata", ".alphac has no format 1 record"),
])
def test_bad_executables_are_refused_by_code(tmp_path, payload, code, tail):
    exe = _exe_with_section(tmp_path, payload)
    with pytest.raises(TargetError) as err:
        read_metadata(exe)
    assert err.value.code == code
    assert tail in err.value.message
    result = CliRunner().invoke(main, ["inspect", str(exe)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"alphac: error[{code}]: {exe}: ")
    assert "Traceback" not in result.output


def test_missing_and_non_elf_files(tmp_path):
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "nope")])
    assert (result.exit_code, result.stderr) == (
        1, f"alphac: error[io-error]: {tmp_path / 'nope'}: No such file or directory\n")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    result = CliRunner().invoke(main, ["inspect", str(text)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"alphac: error[not-an-alphac-executable]: {text}: not an ELF file")
    # a directory is read as a checkpoint (tests/e2e/test_inspect_checkpoint.py)
    result = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert result.exit_code == 1 and result.stderr.startswith("alphac: error[checkpoint-manifest]: ")
