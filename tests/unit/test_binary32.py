"""binary32 in programs: `round32(x)` is the binary32 nearest x (ties to even, subnormals,
overflow to infinity, which refuses), widened exactly; the three oracle engines and the
kernel give the same words; a float32 `.npy` loads as the binary64 words of its values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphac.check.words import load_words
from alphac.ir import nodes as n
from alphac.ir.builders import S, assign
from alphac.oracle.refusal import Site
from alphac.oracle.scalar import run_program
from alphac.oracle.vector import Flagged, SlotStore
from alphac.oracle.vector import run_program as run_vector

K = 8
XS = [0.1, -0.1, 1.0 + 2.0 ** -24, 1.0 + 3 * 2.0 ** -24, 3.4028235e38, 1e-45, 7.01e-46, -0.0]
# 1 + 2^-24 is a tie (to even: 1), 1 + 3 * 2^-24 a tie up; 1e-45 the smallest subnormal,
# 7.01e-46 just above half of it (rounds up to it), -0.0 keeps its sign
WANT = [float(np.float32(x)) for x in XS]


def program() -> n.Program:
    return n.Program(2 * K, (n.Loop("i", 0, K, (assign(K, n.Unary("round32", S(0, "i")), "i", "r[i]"),)),))


def words(a) -> list[int]:
    return np.asarray(a, dtype=np.float64).view(np.uint64).tolist()


def test_the_engines_and_the_kernel_round_alike(tmp_path):
    from test_codegen_program import Kernel

    assert WANT[2] == 1.0 and WANT[3] == 1.0 + 2.0 ** -22 and WANT[5] == WANT[6] > 0.0
    slots = np.array(XS + [0.0] * K)
    p = program()
    scalar = run_program(p, slots.tolist(), Site(0, "contribution"))[K:]
    vector = run_vector(p, SlotStore([(0, slots.reshape(-1, 1).copy())])).rows(K, 2 * K)[:, 0]
    status, _, out = Kernel(tmp_path, p, [(0, K), (K, K)], "round32")(slots)
    assert status == 0
    assert words(scalar) == words(WANT) == words(vector) == words(out[K:])


def test_a_value_beyond_binary32_refuses(tmp_path):
    from test_codegen_program import Kernel

    slots = np.array([1.0, 2.0, 3.5e38] + [0.0] * (2 * K - 3))
    p = program()
    with pytest.raises(Exception) as refused:
        run_program(p, slots.tolist(), Site(0, "contribution"))
    assert getattr(refused.value, "code", None) == "non-finite" and "i=2" in str(refused.value.detail)
    with pytest.raises(Flagged):
        run_vector(p, SlotStore([(0, slots.reshape(-1, 1).copy())]))
    status, coord, _ = Kernel(tmp_path, p, [(0, K), (K, K)], "round32_bad")(slots)
    assert (status, coord) == (1, 2)


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_float32_npy_loads_widened_exactly(tmp_path, order):
    values = np.array([[0.1, -2.5, 3.4028235e38], [1e-45, -0.0, 7.0]], dtype=f"{order}f4")
    np.save(tmp_path / "s.npy", values)
    got = load_words(str(tmp_path / "s.npy"))
    assert got.shape == (2, 3)
    assert got.tolist() == values.astype(np.float64).view(np.uint64).tolist()
    assert math.copysign(1.0, got.view(np.float64)[1, 1]) == -1.0
