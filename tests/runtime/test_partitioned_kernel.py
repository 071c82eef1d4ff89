"""The owned update kernel against the replicated one, called in-process on each owner's
compact storage (the words it holds, in their storage order): for every owner and every
coordinate block size, each word it owns (and every shared word) has the replicated
kernel's bits, every word it holds but does not own is left untouched, and a non-finite
value refuses at the owner of its coordinate only, naming the statement and coordinate the
replicated kernel names."""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir

from alphac.codegen.owned import emit_owned_update
from alphac.codegen.program import emit_program, program_regions
from alphac.codegen.types import I64, VOID
from alphac.ir.nodes import Replicate
from alphac.testing import session
from alphac.plan.layout import OwnerLayout
from alphac.plan.separable import SHARED, layout_of
from alphac.targets import compile_object

SPECS = Path(__file__).resolve().parents[2] / "specs"


class Pair:
    """The replicated and the owned update kernel of one deployment in one shared object."""

    def __init__(self, tmp_path, dep):
        L = dep.learner
        self.k, self.m, self.n = L.k, L.m, dep.owners
        self.regions = program_regions("update", L.k, L.s, L.m)
        module = ir.Module("pair")
        emit_program(module, L.update, "repl", self.regions)
        _, owner_g = emit_owned_update(module, L.update, L.k, L.s, L.m, layout_of(L, dep.partitioning),
                                       dep.owners, dep.partitioning, "owned")
        setter = ir.Function(module, ir.FunctionType(VOID, (I64,)), "set_owner")
        b = ir.IRBuilder(setter.append_basic_block("entry"))
        b.store(setter.args[0], owner_g)
        b.ret_void()
        obj = tmp_path / "pair.o"
        obj.write_bytes(compile_object(module, "x86_64"))
        so = tmp_path / "pair.so"
        subprocess.run(["cc", "-shared", "-o", str(so), str(obj)], check=True)
        self.lib = ctypes.CDLL(str(so))
        self.lib.repl.restype = self.lib.owned.restype = ctypes.c_int64
        self.classes = layout_of(L, dep.partitioning).classes
        self.layout = OwnerLayout.of(dep)

    def positions(self, owner: int | None) -> list[np.ndarray]:
        """The slots each region's words are, in storage order: all of them for the
        replicated kernel, the owner's compact storage for the owned one."""
        if owner is None:
            return [np.arange(a, a + ln) for a, ln in self.regions]
        L, (p0, _), (s0, _), (m0, _), (r0, _) = self.layout, *self.regions
        return [p0 + L.params_held(owner), s0 + L.state_stored(owner), m0 + L.coordinates(owner),
                np.array([r0])]

    def call(self, name: str, slots: np.ndarray, owner: int = 0):
        """Run a kernel on the words of `slots` it is given; the slots afterwards."""
        if name == "owned":
            self.lib.set_owner(ctypes.c_int64(owner))
        where = self.positions(owner if name == "owned" else None)
        bufs = [np.ascontiguousarray(slots[pos], dtype=np.float64) for pos in where]
        coord = ctypes.c_int64(-7)
        status = getattr(self.lib, name)(*[x.ctypes.data_as(ctypes.c_void_p) for x in bufs],
                                         ctypes.byref(coord))
        out = slots.copy()
        for pos, x in zip(where, bufs):
            out[pos] = x
        return status, coord.value, out.view(np.uint64)


def _slots(pair, seed):
    rng = np.random.default_rng(seed)
    k, m = pair.k, pair.m
    s = rng.uniform(-3.0, 3.0, 2 * k + m + 1)
    s[k:k + m] = np.abs(s[k:k + m])  # second moments >= 0
    shared = pair.classes[k:k + m] == SHARED
    s[k:k + m][shared] = rng.uniform(0.2, 0.8, int(shared.sum()))  # the powers, in (0, 1)
    s[-1] = 0.001
    return s


def _blocks(dep, block: int, **flags):
    return dataclasses.replace(dep, partitioning=dataclasses.replace(dep.partitioning, block_words=block,
                                                                     **flags))


FLAGS = {"all": {}, "state": {"parameters": Replicate(), "gradients": Replicate()},
         "parameters": {"optimizer_state": Replicate(), "gradients": Replicate()},
         "gradients": {"optimizer_state": Replicate(), "parameters": Replicate()}}


@pytest.mark.parametrize("spec", ["lsq_adam_partitioned_hierarchy", "lsq_adam_partitioned_hierarchy7",
                                  "lsq_momentum_partitioned_star"])
@pytest.mark.parametrize("block", [1, 2, 3, 7])
@pytest.mark.parametrize("flags", sorted(FLAGS))
def test_owned_words_have_the_replicated_bits_and_others_are_untouched(tmp_path, spec, block, flags):
    dep = _blocks(session.deployment(f"{SPECS}/{spec}.alpha"), block, **FLAGS[flags])
    pair = Pair(tmp_path, dep)
    k, m = pair.k, pair.m
    cls = pair.classes[:k + m]
    owner = np.where(cls >= 0, (cls // block) % pair.n, -1)
    for seed in range(3):
        slots = _slots(pair, seed)
        status, _, want = pair.call("repl", slots)
        assert status == 0
        before = slots.view(np.uint64)
        for o in range(pair.n):
            status, _, got = pair.call("owned", slots, o)
            assert status == 0
            mine = (cls == SHARED) | (owner == o)
            assert np.array_equal(got[:k + m][mine], want[:k + m][mine])
            assert np.array_equal(got[:k + m][~mine], before[:k + m][~mine])
        # every word of the update changes somewhere, so "untouched" is a real check
        assert np.all(want[:k + m] != before[:k + m])


@pytest.mark.parametrize("block,at", [(1, 3), (2, 1), (3, 1)])
def test_non_finite_mean_refuses_only_at_its_coordinates_owner(tmp_path, block, at):
    dep = _blocks(session.deployment(f"{SPECS}/lsq_adam_partitioned_hierarchy7.alpha"), block)
    pair = Pair(tmp_path, dep)
    k, m = pair.k, pair.m
    slots = _slots(pair, 7)
    slots[k + m + 3] = np.inf  # the mean of coordinate 3
    status, coord, _ = pair.call("repl", slots)
    assert (status, coord) == (3, 3)  # m1[i] := ... (after the two powers), coordinate 3
    for o in range(pair.n):
        got = pair.call("owned", slots, o)[:2]
        assert got == ((3, 3) if o == at else (0, -7))
