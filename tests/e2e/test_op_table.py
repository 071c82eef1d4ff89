"""The op table (alphac/plan/ops.py) is the one definition of every op kind: ops are checked
against it when built, the renderer, the register analysis and the C header read it, and an
executable whose op words disagree with their kind's row refuses by name."""

from __future__ import annotations

import struct
import subprocess

import pytest

from alphac import driver
from alphac.image.cheader import runtime_header
from alphac.plan import ops
from alphac.plan.ops import KIND, OP_TABLE, Op, render
from alphac.plan.protocol import OwnerProtocol, register_count
from alphac.launch.ports import free_ports


def test_codes_are_the_rows_in_order_and_each_row_is_whole():
    assert [k.code for k in OP_TABLE] == list(range(len(OP_TABLE)))
    assert len(set(ops.OP_KINDS)) == len(OP_TABLE)
    for k in OP_TABLE:
        assert {o.type for o in k.operands} <= set(ops.OPERAND_TYPES) - {ops.NONE}, k.name
        assert len({o.name for o in k.operands}) == len(k.operands), k.name
        assert [t for t in k.word_types() if t in (ops.FIRST, ops.SAMPLES)] in ([], [ops.FIRST, ops.SAMPLES])
        if k.matches:  # a receive pairs with a send of its peer
            assert k.talks and KIND[k.matches].talks and not KIND[k.matches].matches, k.name
        if k.count:  # a count rule belongs to an op that writes a register
            assert k.of_type(ops.WRITE), k.name


def test_an_op_is_built_by_operand_name_and_checked_against_its_row():
    assert Op.of("install", src=3, regions=ops.REGION_STATE) == Op("install", a=3, b=2)
    assert Op.of("exchange", count=4).operand("count") == 4
    with pytest.raises(ValueError, match="no operand in word b"):
        Op("update", a=1, b=3)
    with pytest.raises(ValueError, match="not in the op table"):
        Op("fused")
    with pytest.raises(ValueError, match="no operand peer"):
        Op.of("combine", dst=2, left=0, right=1, peer=3)


def test_reads_and_writes_are_the_register_operands():
    combine = Op.of("combine", dst=4, left=2, right=3)
    assert (combine.reads(), combine.writes()) == ((2, 3), (4,))
    block = Op.of("sample-block", dst=1, first=40, count=8)  # sample positions, no registers
    assert (block.reads(), block.writes()) == ((), (1,))
    assert Op.of("offer", dst=2, regions=3).reads() == ()   # a mask, no register
    proto = OwnerProtocol(0, (Op("local", dst=0), block, Op.of("update", mean=1)), ())
    assert register_count(proto) == 2
    # a receive and its combine as one op: the register the frame fills is written first,
    # then the sum, and both operands are read
    fused = Op.of("recv-add-right", peer=1, dst=4, left=2, right=3)
    assert (fused.reads(), fused.writes()) == ((2, 3), (3, 4))
    assert fused.spec.moved.name == "right" and fused.spec.matches == "send"
    assert Op.of("recv-update", peer=0, mean=5).writes() == (5,)


@pytest.mark.parametrize("op, text", [
    (Op("local", dst=0), "local r0"),
    (Op("send", peer=3, a=6), "send r6 -> 3"),
    (Op("recv", peer=1, dst=5), "recv r5 <- 1"),
    (Op("combine", dst=4, a=2, b=3), "combine r4 = r2 + r3"),
    (Op("select", dst=4, a=2, b=3), "select r4 = r2 | r3"),
    (Op("slice", peer=2, dst=1, a=0), "slice r1 = r0 at owner 2's coordinates"),
    (Op("place", peer=2, dst=7, a=3), "place r7 <- r3 at owner 2's coordinates"),
    (Op("offer", dst=1, a=3), "offer r1 = own parameters+state"),
    (Op("install", a=5, b=2), "install r5 into state"),
    (Op("sample-block", dst=1, a=8, b=4), "sample-block r1 = samples 8..11"),
    (Op("exchange", b=6), "exchange: the next 6 at once"),
    (Op("update-owned", a=9), "update-owned r9"),
    (Op("digest-recv", peer=2), "digest-recv <- 2"),
    (Op("publish-send", peer=1), "publish-send -> 1"),
    (Op("replica-release"), "replica-release"),
    (Op("recv-add-left", peer=2, dst=4, a=3, b=1), "recv-add r4 = r3 <- 2 + r1"),
    (Op("recv-add-right", peer=2, dst=4, a=1, b=3), "recv-add r4 = r1 + r3 <- 2"),
    (Op("recv-update", peer=0, a=1), "recv-update r1 <- 0"),
])
def test_an_op_renders_by_its_row(op, text):
    assert render(op) == text


def test_the_header_has_one_operand_row_per_kind_in_code_order():
    header = runtime_header()
    rows = [line for line in header.splitlines() if line.strip().startswith("{OPND_")]
    assert [row.split("/* ")[1].split(" */")[0] for row in rows] == list(ops.OP_KINDS)
    assert rows[KIND["install"].code].strip().startswith(
        "{OPND_NONE, OPND_NONE, OPND_READ, OPND_MASK}")


@pytest.fixture(scope="module")
def one_owner(tmp_path_factory):
    """A one-owner sample-tree executable and its `update` op's words."""
    from test_sampletree import on

    dep = on((13,))
    plan = driver.plan(dep)
    exe = driver.build(plan, "coordinator", "x86_64", tmp_path_factory.mktemp("bin"))
    image = driver.image(plan, "coordinator", "x86_64")
    update = next(op for op in image.owners[0].ops if op[0] == ops.OP_CODE["update"])
    return exe, tuple(w - 2**64 if w >= 2**63 else w for w in update)


@pytest.mark.parametrize("word, value, detail", [
    (4, 7, "unused operand 7"),  # update's b is no operand
    (3, -2, "register -2"),      # its mean register below 0
    (3, 99, "register 99"),
])
def test_an_op_word_against_its_row_is_a_corrupt_executable(tmp_path, one_owner, word, value, detail):
    exe, update = one_owner
    data = exe.read_bytes()
    good = struct.pack("<7q", *update)
    assert data.count(good) == 1
    patched = list(update)
    patched[word] = value
    bad = tmp_path / "exe"
    bad.write_bytes(data.replace(good, struct.pack("<7q", *patched)))
    bad.chmod(0o755)
    (tmp_path / "peers").write_text(f"0 127.0.0.1:{free_ports(1)[0]}\n")
    done = subprocess.run([str(bad), "--owner", "0", "--peers", str(tmp_path / "peers"), "--out",
                           str(tmp_path / "o"), "--insecure"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        1, f"refused: corrupt-executable: owner 0: corrupt op table ({detail})\n")
    assert not (tmp_path / "o").exists()
