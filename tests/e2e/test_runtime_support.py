"""Shared by the runtime tests: small least-squares deployments built from IR nodes, a
Python-float reference of the declared order, and running owners as real processes."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import numpy as np

from alphac.driver import build as build_executable
from alphac.launch.runner import default_transport
from alphac.ir import nodes as n
from alphac.plan.tree import build_tree, postorder
from alphac.testing.outputs import refusal_code  # noqa: F401 (the tests import it from here)
from alphac.ir.words import to_bits as word, to_float as value

HAVE_AARCH64 = shutil.which("qemu-aarch64") is not None and shutil.which("aarch64-linux-gnu-gcc") is not None
RUNNER = {"x86_64": (), "aarch64": ("qemu-aarch64",)}
OUT_MAGIC = 0x3154554F41484C41


def _s(i: int) -> n.SlotRef:
    return n.SlotRef(n.Index(i))


def _b(op: str, a, b) -> n.Binary:
    return n.Binary(op, a, b)


def lsq_learner(shares=(1, 2, 3, 0), kind: str = "plain", rate: float = 0.1, seed: int = 1) -> n.Learner:
    """k = 2, s = 3 (x0, x1, y); contribution c = (w.x - y) x; plain or momentum steps."""
    r = _b("sub", _b("add", _b("mul", _s(0), _s(2)), _b("mul", _s(1), _s(3))), _s(4))
    contribution = n.Program(7, (n.Assign(n.Index(5), _b("mul", r, _s(2)), label="c[0]"),
                                 n.Assign(n.Index(6), _b("mul", r, _s(3)), label="c[1]")))
    if kind == "plain":
        m = 0
        update = n.Program(5, (
            n.Assign(n.Index(0), _b("sub", _s(0), _b("mul", _s(4), _s(2))), label="w[0]"),
            n.Assign(n.Index(1), _b("sub", _s(1), _b("mul", _s(4), _s(3))), label="w[1]")))
    else:
        m = 2
        beta = n.Const(word(0.9))
        update = n.Program(7, (
            n.Assign(n.Index(2), _b("add", _b("mul", beta, _s(2)), _s(4)), label="v[0]"),
            n.Assign(n.Index(3), _b("add", _b("mul", beta, _s(3)), _s(5)), label="v[1]"),
            n.Assign(n.Index(0), _b("sub", _s(0), _b("mul", _s(6), _s(2))), label="w[0]"),
            n.Assign(n.Index(1), _b("sub", _s(1), _b("mul", _s(6), _s(3))), label="w[1]")))
    rng = np.random.default_rng(seed)
    rows = sum(shares)
    data = np.array([word(float(v)) for v in rng.normal(size=3 * rows)], dtype=np.uint64).reshape(rows, 3)
    return n.Learner("lsq", 2, 3, m, contribution, update, n.Words((word(0.5), word(-0.25))),
                     n.Words((0,) * m), word(rate), n.Samples(3, tuple(shares), data))


def deployment(owners: int = 4, topology=None, kind: str = "plain", shares=None, placement=None,
               updates: int = 5, rate: float = 0.1, seed: int = 1, stem: str = "lsq_rt") -> n.Deployment:
    shares = shares if shares is not None else (1, 2, 3, 0)[:owners] + (1,) * max(0, owners - 4)
    roles = (n.Role("coordinator", (0,)), n.Role("worker", tuple(range(1, owners))))
    return n.Deployment(f"run_{stem}", lsq_learner(shares, kind, rate, seed), owners, topology or n.Star(),
                        n.Partitioning(), roles, tuple(placement or ("x86_64",) * owners), updates,
                        n.Contract(), n.Checkpoint(), source_file=f"{stem}.alpha")


def plan_of(dep: n.Deployment):
    from alphac.plan.planner import plan

    return plan(dep)


# ----------------------------------------------------------------------------- reference

def _eval(expr, slots: list, env: dict) -> float:
    if isinstance(expr, n.Const):
        return value(expr.bits)
    if isinstance(expr, n.SlotRef):
        return slots[expr.index.base]
    if isinstance(expr, n.Local):
        return env[expr.name]
    if isinstance(expr, n.Binary):
        a, b = _eval(expr.lhs, slots, env), _eval(expr.rhs, slots, env)
        if expr.op == "add":
            return a + b
        if expr.op == "sub":
            return a - b
        if expr.op == "mul":
            return a * b
        return a / b
    raise NotImplementedError(type(expr))


def _run(program: n.Program, slots: list) -> None:
    env: dict = {}
    for st in program.body:
        if isinstance(st, n.Assign):
            slots[st.target.base] = _eval(st.value, slots, env)
        else:
            env[st.name] = _eval(st.value, slots, env)


def reference(dep: n.Deployment, updates: int | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(params, state) words after `updates` updates of the declared tree, in Python floats."""
    L = dep.learner
    k, m = L.k, L.m
    params = [value(w) for w in L.initial.as_tuple()]
    state = [value(w) for w in L.initial_state.as_tuple()]
    tree = build_tree(dep.owners, dep.topology)
    for _ in range(dep.updates if updates is None else updates):
        local = {}
        for o in range(dep.owners):
            acc = [0.0] * k
            for row in L.samples.owner_rows(o):
                slots = params + [value(int(w)) for w in row] + [0.0] * k
                _run(L.contribution, slots)
                acc = [acc[j] + slots[k + L.s + j] for j in range(k)]
            local[o] = (acc, len(L.samples.owner_rows(o)))
        val = {}
        for node in postorder(tree):
            if isinstance(node, n.TreeLeaf):
                val[id(node)] = local[node.owner]
            else:
                (a, ca), (b, cb) = val[id(node.left)], val[id(node.right)]
                val[id(node)] = ([x + y for x, y in zip(a, b)], ca + cb)
        total, count = val[id(tree)]
        slots = params + state + [g / count for g in total] + [value(L.rate)]
        _run(L.update, slots)
        params, state = slots[:k], slots[k:k + m]
    return tuple(map(word, params)), tuple(map(word, state))


# ----------------------------------------------------------------------------- processes

_BUILT: dict = {}


def build(dep: n.Deployment, out_dir: Path) -> dict[tuple[str, str], Path]:
    """Every (role, target) the placement needs, built once per deployment and directory."""
    key = (id(dep), str(out_dir))
    if key not in _BUILT:
        p = plan_of(dep)
        exes = {}
        for o in range(dep.owners):
            role, target = dep.role_of(o).name, dep.placement[o]
            if (role, target) not in exes:
                exes[(role, target)] = build_executable(p, role, target, out_dir)
        _BUILT[key] = (dep, exes)
    return _BUILT[key][1]


def free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_peers(path: Path, ports, hosts=None, played=()) -> Path:
    """Owners the test plays (`played`) speak TCP; the others may use what the launcher
    lets them (runner.default_transport)."""
    hosts = hosts or ["127.0.0.1"] * len(ports)
    modes = ["" if o in played or default_transport() == "tcp" else f" {default_transport()}"
             for o in range(len(ports))]
    path.write_text("".join(f"{o} {h}:{p}{m}\n" for o, (h, p, m) in enumerate(zip(hosts, ports, modes))))
    return path


def owner_command(dep, exes, owner: int, peers: Path, out: Path, *extra: str) -> list[str]:
    target = dep.placement[owner]
    exe = exes[(dep.role_of(owner).name, target)]
    return [*RUNNER[target], str(exe), "--owner", str(owner), "--peers", str(peers),
            "--out", str(out), "--insecure", *extra]


class Run:
    """Owners started as processes; always reaped (killed if still running) by `finish`."""

    def __init__(self, dep, exes, work: Path, owners=None, extra=(), ports=None, hosts=None):
        self.dep = dep
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.ports = ports or free_ports(dep.owners)
        played = () if owners is None else [o for o in range(dep.owners) if o not in owners]
        self.peers = write_peers(work / "peers", self.ports, hosts, played)
        self.outs = {o: work / f"owner{o}.out" for o in range(dep.owners)}
        self.procs = {}
        for o in (range(dep.owners) if owners is None else owners):
            cmd = owner_command(dep, exes, o, self.peers, self.outs[o], *extra)
            self.procs[o] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.started = time.monotonic()

    def finish(self, timeout: float = 30.0) -> dict[int, tuple[int, str]]:
        """{owner: (exit status, stderr)} once every owner ended (killed after `timeout`)."""
        result = {}
        try:
            for o, p in self.procs.items():
                left = max(0.1, timeout - (time.monotonic() - self.started))
                try:
                    _, err = p.communicate(timeout=left)
                except subprocess.TimeoutExpired:
                    p.kill()
                    _, err = p.communicate()
                result[o] = (p.returncode, err.decode())
        finally:
            for p in self.procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return result


def read_output(path: Path) -> dict:
    data = path.read_bytes()
    w = struct.unpack(f"<{len(data) // 8}Q", data)
    k, m = w[5], w[6]
    assert len(w) == 7 + k + m
    return {"magic": w[0], "format": w[1], "owner": w[2], "version": w[3], "protocol": w[4],
            "params": tuple(w[7:7 + k]), "state": tuple(w[7 + k:7 + k + m])}


def run_dir(tmp: Path, name: str) -> Path:
    d = tmp / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def remove(path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
