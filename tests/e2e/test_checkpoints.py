"""Checkpoints written and restored by real owners (docs/checkpoints.md): every shard holds
exactly the oracle's words at its version; a resume equals the uninterrupted run bit for bit,
on the other instruction set and across partitionings of the same tree; checkpoints do not
depend on how gradients are partitioned; restores refuse a checkpoint that does not verify."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from alphac.checkpoint import CheckpointError, logical_words, read_key, read_manifest, render, verify
from alphac.checkpoint.manifest import manifest_tag
from alphac.ir import nodes as n
from alphac.launch.checkpoints import checkpoint_arguments, checkpoint_key_file, run_arguments
from alphac.launch.report import compare
from alphac.oracle import evaluate
from alphac.testing.outputs import refusal_code
from alphac.testing.session import owner_exes
from alphac.testing import session
from alphac.launch.ports import free_ports

SPECS = Path(__file__).resolve().parents[2] / "specs"
ADAM7 = session.deployment(f"{SPECS}/lsq_adam_partitioned_hierarchy7.alpha")


def variant(dep, every=2, placement=None, **flags):
    part = dataclasses.replace(dep.partitioning, **flags) if flags else dep.partitioning
    return dataclasses.replace(dep, partitioning=part, checkpoint=n.Checkpoint(every, ""),
                               placement=tuple(placement or dep.placement))


REGIONS = {"replicated": (False, False, False), "state": (True, False, False),  # state, parameters, gradients
           "parameters": (False, True, False), "gradients": (False, False, True), "all": (True, True, True)}
FLAGS = {name: dict(optimizer_state=n.placed(state), parameters=n.placed(params), gradients=n.placed(grads))
         for name, (state, params, grads) in REGIONS.items()}
DEPS = {name: variant(ADAM7, **flags) for name, flags in FLAGS.items()}


def run(name: str, dep, ckpt_dir: Path, resume=None, new_contract=False, updates=None):
    """Every owner of `dep` (built once under the key `name`), checkpointing into ckpt_dir."""
    args = run_arguments(ckpt_dir, resume, new_contract)
    return session.run(name, dep, updates=updates, timeout_ms=10000, deadline_s=60,
                       extra_argv={o: args for o in range(dep.owners)})


def outputs(r) -> dict[int, bytes]:
    assert r.committed, [oc.stderr for oc in r.result.outcomes]
    return {o: (r.run_dir / f"owner-{o}.out").read_bytes() for o in sorted(r.outputs)}


def oracle_words(dep, version):
    """The logical parameter and state words after `version` updates: the replicated oracle
    owner 0 holds them all."""
    o = evaluate(dataclasses.replace(dep, partitioning=n.Partitioning()), version).owners[0]
    return np.array(o.params, dtype=np.uint64), np.array(o.state, dtype=np.uint64)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Each partitioning, run 5 updates with a checkpoint every 2: its checkpoint directory
    and outputs."""
    out = {}
    for name, dep in DEPS.items():
        d = tmp_path_factory.mktemp(f"ckpt-{name}")
        out[name] = (d, outputs(run(f"ckpt7-{name}", dep, d)))
    return out


@pytest.mark.parametrize("name", list(FLAGS))
def test_checkpoints_hold_the_oracles_words_at_their_version(written, name):
    d, _ = written[name]
    assert sorted(p.name for p in d.iterdir()) == ["ckpt-2", "ckpt-4"]
    for version in (2, 4):
        manifest = verify(d / f"ckpt-{version}")
        assert manifest.version == version
        params, state = oracle_words(ADAM7, version)
        words = logical_words(d / f"ckpt-{version}", manifest)
        assert words["parameters"].tolist() == params.tolist()
        assert words["state"].tolist() == state.tolist()
        # every shard holds exactly its words: each fragment's positions, the oracle's words
        for f in manifest.fragments:
            data = (d / f"ckpt-{version}" / f"shard-{f.owner}.bin").read_bytes()
            got = np.frombuffer(data, dtype="<u8", count=f.words, offset=f.offset)
            want = (params if f.region == "parameters" else state)[f.positions()]
            assert got.tolist() == want.tolist()


def test_the_owners_tag_the_root_manifest_under_the_checkpoint_key(written):
    d = written["replicated"][0] / "ckpt-2"
    m = read_manifest(d)
    key = read_key(checkpoint_key_file())
    assert m.auth == f"hmac-sha256 {manifest_tag(m, key)}" and verify(d, key) == m
    assert read_manifest(d, "manifest-1.txt").auth is None  # a child manifest: the root's hashes cover it
    with pytest.raises(CheckpointError) as err:
        verify(d, b"another key, 32 bytes long......")
    assert err.value.code == "checkpoint-auth"


def test_without_a_checkpoint_key_the_run_key_tags_the_checkpoint(tmp_path):
    import secrets

    d = tmp_path / "c"
    args = ("--run-id", secrets.token_hex(8)) + checkpoint_arguments(d)
    assert "--checkpoint-key" not in args
    r = session.run("ckpt7-replicated", DEPS["replicated"], timeout_ms=10000, deadline_s=60,
                    extra_argv={o: args for o in range(ADAM7.owners)})
    assert outputs(r)
    m = read_manifest(d / "ckpt-2")
    assert m.auth == f"hmac-sha256 {manifest_tag(m, (r.run_dir / 'run.key').read_bytes())}"


def files_of(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def assert_planned_bytes(key: str, dep, d: Path, tmp_path: Path) -> None:
    """Each checkpoint the owners wrote is, byte for byte, the one the Python writer makes
    of the plan and the oracle's words (alphac.image.ckpt.write_plan_checkpoint), its root
    manifest tagged under the launcher's checkpoint key as the owners tagged theirs."""
    from alphac.image.ckpt import write_plan_checkpoint

    for version in (2, 4):
        params, state = oracle_words(ADAM7, version)
        want = tmp_path / f"{key}-planned-{version}"
        write_plan_checkpoint(session.plan(key, dep), want, version, params, state,
                              key=read_key(checkpoint_key_file()))
        assert files_of(d / f"ckpt-{version}") == files_of(want)


@pytest.mark.parametrize("name", list(FLAGS))
def test_the_owners_write_the_planned_checkpoint_byte_for_byte(written, tmp_path, name):
    assert_planned_bytes(f"ckpt7-{name}", DEPS[name], written[name][0], tmp_path)


def test_checkpoints_do_not_depend_on_how_gradients_are_partitioned(written):
    def files(name):
        return files_of(written[name][0])

    assert files("gradients") == files("replicated")
    ungraded = variant(ADAM7, **{**FLAGS["all"], "gradients": n.Replicate()})
    d = written["all"][0].parent / "all-no-gradients"
    d.mkdir()
    outputs(run("ckpt7-all-nograd", ungraded, d))
    assert files_of(d) == files("all")


@pytest.mark.parametrize("src,dst", [("replicated", name) for name in FLAGS]
                         + [(name, "replicated") for name in FLAGS if name != "replicated"]
                         + [("all", "state"), ("state", "all"), ("parameters", "gradients")])
def test_a_resume_equals_the_uninterrupted_run_across_partitionings(written, tmp_path, src, dst):
    """Restored at version 2 from a checkpoint of one partitioning into another on the same
    tree, the run ends with the uninterrupted run's output files, byte for byte."""
    ckpt = written[src][0] / "ckpt-2"
    again = outputs(run(f"ckpt7-{dst}", DEPS[dst], tmp_path / "c", resume=ckpt))
    assert again == written[dst][1]


@pytest.mark.parametrize("dst", ["replicated", "all"])
def test_a_checkpoint_whose_root_wrote_every_replicated_word_still_resumes(written, tmp_path, dst):
    """Before each owner wrote a block of a replicated region, the root wrote all of it and
    every other shard was a header alone. The fragment table says who wrote what, so such a
    checkpoint (the same lines, one writer) resumes like any other, with the uninterrupted
    run's output files byte for byte."""
    from alphac.checkpoint.write import write_checkpoint
    from alphac.image.ckpt import checkpoint_lines, tree_children

    plan = session.plan("ckpt7-replicated", DEPS["replicated"])
    params, state = oracle_words(ADAM7, 2)
    fragments = {o: [] for o in range(ADAM7.owners)}
    fragments[0] = [("parameters", ((0, 1, len(params)),), params), ("state", ((0, 1, len(state)),), state)]
    lines, key = checkpoint_lines(plan), read_key(checkpoint_key_file())
    ckpt = tmp_path / "one-writer" / "ckpt-2"
    write_checkpoint(ckpt, version=2, learner=lines.learner, inputs=lines.inputs, contract=lines.contract,
                     layout=lines.layout, regions=lines.regions, fragments=fragments,
                     children=tree_children(plan), key=key)
    assert {f.owner for f in verify(ckpt, key).fragments} == {0}
    # as the owners write it now: k = 5 and m = 12 words in blocks of 1 and 2 over 7 owners
    assert {f.owner for f in read_manifest(written["replicated"][0] / "ckpt-2").fragments} == set(range(6))
    again = outputs(run(f"ckpt7-{dst}", DEPS[dst], tmp_path / "c", resume=ckpt))
    assert again == written[dst][1]


def test_a_resume_on_the_other_instruction_set_equals_the_uninterrupted_run(written, tmp_path):
    if shutil.which("qemu-aarch64") is None:
        pytest.skip("qemu-aarch64 is not installed")
    swap = {"x86_64": "aarch64", "aarch64": "x86_64"}
    dep = variant(DEPS["all"], placement=[swap[t] for t in ADAM7.placement])
    again = outputs(run("ckpt7-all-swapped", dep, tmp_path / "c", resume=written["all"][0] / "ckpt-2"))
    assert again == written["all"][1]


def blocks(dep, block: int):
    return dataclasses.replace(dep, partitioning=dataclasses.replace(dep.partitioning, block_words=block))


@pytest.mark.parametrize("src", ["all", "state", "parameters"])
def test_a_checkpoint_of_coordinate_blocks_resumes_without_them(written, tmp_path, src):
    """Written with B = 3, a checkpoint is the planned one (its fragments name their logical
    positions, its words are the oracle's) and resumes, on the same contract, into B = 1 and into the replicated
    learner with the uninterrupted runs' outputs byte for byte; and a B = 1 checkpoint
    resumes into B = 3 with that run's own outputs."""
    d = tmp_path / "b3"
    d.mkdir()
    b3 = blocks(DEPS[src], 3)
    uninterrupted = outputs(run(f"ckpt7-{src}-b3", b3, d))
    assert_planned_bytes(f"ckpt7-{src}-b3", b3, d, tmp_path)
    for dst in ("all", "replicated"):
        again = outputs(run(f"ckpt7-{dst}", DEPS[dst], tmp_path / f"to-{dst}", resume=d / "ckpt-2"))
        assert again == written[dst][1]
    again = outputs(run(f"ckpt7-{src}-b3", b3, tmp_path / "to-b3", resume=written["all"][0] / "ckpt-2"))
    assert again == uninterrupted


# -- restore refusals, by a single owner before it connects ------------------------------------

def _restore(tmp_path, ckpt: Path, dep=None, key="ckpt7-replicated", extra=()):
    """Owner 0 alone restoring `ckpt`: its exit status and refusal line."""
    import subprocess

    dep = dep or DEPS["replicated"]
    exe = owner_exes(dep, session.built(key, dep))[0]
    peers = tmp_path / "peers"
    peers.write_text("".join(f"{o} 127.0.0.1:{p}\n" for o, p in enumerate(free_ports(dep.owners))))
    done = subprocess.run([str(exe), "--owner", "0", "--peers", str(peers), "--out", str(tmp_path / "o0"), "--insecure",
                           "--resume", str(ckpt), "--checkpoint-dir", str(tmp_path / "ck"),
                           "--timeout-ms", "300", *extra], capture_output=True, text=True, timeout=30)
    return done.returncode, done.stderr.strip()


def _copy(written, tmp_path, name="replicated", version=2) -> Path:
    dst = tmp_path / f"ckpt-{version}"
    shutil.copytree(written[name][0] / f"ckpt-{version}", dst)
    return dst


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("target", ["shard-0.bin", "manifest.txt", "manifest-1.txt"])
def test_a_flipped_byte_anywhere_refuses_hash_mismatch(written, tmp_path, target):
    ckpt = _copy(written, tmp_path)
    size = (ckpt / target).stat().st_size
    for at in (0, size // 2, size - 2):
        copy = tmp_path / f"flip-{at}"
        shutil.copytree(ckpt, copy)
        before = (ckpt / target).read_bytes()[at:at + 1]
        _flip(copy / target, at)
        rc, err = _restore(tmp_path, copy)
        assert rc == 1 and err.split(":", 2)[1].strip() in ("checkpoint-hash-mismatch", "checkpoint-manifest"), err
        if target == "manifest.txt" and at == 0:
            continue  # the root manifest's first byte names its format: either code
        # near the root manifest's end lies its own sha256, whose flipped digit may be no
        # hex digit ('a' -> '`', 'f' -> 'g'): a malformed line, not a mismatch
        hexdigits = b"0123456789abcdef"
        malformed = target == "manifest.txt" and before in hexdigits and (copy / target).read_bytes()[at:at + 1] not in hexdigits
        assert ("checkpoint-manifest" if malformed else "checkpoint-hash-mismatch") in err, err


def test_a_fragment_not_where_its_shard_lays_it_refuses(written, tmp_path):
    """The shard's digest hashes the fragments' digests, not their bytes in place: a fragment
    line (re-signed) pointing elsewhere in the file is refused before any word is used."""
    ckpt = _copy(written, tmp_path)
    root = read_manifest(ckpt)
    f = next(f for f in root.fragments if f.owner == 0 and f.words)
    moved = tuple(dataclasses.replace(x, offset=x.offset + 8) if x == f else x for x in root.fragments)
    (ckpt / "manifest.txt").write_text(render(dataclasses.replace(root, fragments=moved)))
    rc, err = _restore(tmp_path, ckpt)
    assert rc == 1 and err.startswith("refused: checkpoint-manifest: ") and "lies outside its shard" in err, err


def test_a_missing_shard_refuses(written, tmp_path):
    ckpt = _copy(written, tmp_path)
    (ckpt / "shard-0.bin").unlink()
    rc, err = _restore(tmp_path, ckpt)
    assert rc == 1 and err.startswith("refused: checkpoint-shard-missing: ") and "shard-0.bin" in err


def test_a_child_manifest_of_another_version_refuses(written, tmp_path):
    ckpt = _copy(written, tmp_path)
    older = written["replicated"][0] / "ckpt-4" / "manifest-1.txt"
    shutil.copy(older, ckpt / "manifest-1.txt")
    text = (ckpt / "manifest.txt").read_text()
    # the root names the other manifest's hash, so only the version gives it away
    import re

    sha = hashlib.sha256(older.read_bytes()).hexdigest()
    body = re.sub(r"manifest 1 manifest-1.txt [0-9a-f]{64}", f"manifest 1 manifest-1.txt {sha}",
                  text.rsplit("sha256 ", 1)[0])
    (ckpt / "manifest.txt").write_text(body + f"sha256 {hashlib.sha256(body.encode()).hexdigest()}\n")
    rc, err = _restore(tmp_path, ckpt)
    assert rc == 1 and err.startswith("refused: checkpoint-version: ") and "version 4" in err, err


def test_a_checkpoint_of_another_learner_refuses(tmp_path):
    momentum = session.deployment(f"{SPECS}/lsq_momentum_hierarchy.alpha")
    other = variant(momentum)
    d = tmp_path / "m"
    outputs(run("ckpt-momentum4", other, d, updates=2))
    rc, err = _restore(tmp_path, d / "ckpt-2")
    assert rc == 1 and err.startswith("refused: checkpoint-learner-mismatch: "), err


def test_a_truncated_manifest_refuses(written, tmp_path):
    ckpt = _copy(written, tmp_path)
    text = (ckpt / "manifest.txt").read_bytes()
    (ckpt / "manifest.txt").write_bytes(text[: len(text) // 2])
    rc, err = _restore(tmp_path, ckpt)
    assert rc == 1 and err.startswith("refused: checkpoint-manifest: "), err


def test_a_partial_directory_is_never_loaded(written, tmp_path):
    partial = tmp_path / "ckpt-2.partial-0123456789abcdef"
    shutil.copytree(written["replicated"][0] / "ckpt-2", partial)
    rc, err = _restore(tmp_path, partial)
    assert (rc, err) == (1, f"refused: checkpoint-manifest: '{partial}' is a partial checkpoint, never loaded")


def test_an_existing_checkpoint_is_never_overwritten(written, tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    (d / "ckpt-4").mkdir()
    (d / "ckpt-4" / "keep").write_bytes(b"keep")
    r = run("ckpt7-replicated", DEPS["replicated"], d)
    assert not r.committed
    errs = [oc.stderr for oc in r.result.outcomes if "checkpoint-exists" in oc.stderr]
    assert errs and f"'{d / 'ckpt-4'}' exists; checkpoints are never overwritten" in errs[0]
    assert sorted(p.name for p in d.iterdir()) == ["ckpt-4"] and os.listdir(d / "ckpt-4") == ["keep"]


# -- crash safety ---------------------------------------------------------------------------------

CRASH = variant(session.deployment(f"{SPECS}/lsq_adam_hierarchy_ckpt.alpha"), every=1,
                placement=["x86_64"] * 4)
CKPT_WINDOWS = ("ckpt-stage", "ckpt-manifest", "ckpt-publish", "ckpt-send")


@pytest.fixture(scope="module")
def crash_reference(tmp_path_factory):
    return outputs(run("crash4", CRASH, tmp_path_factory.mktemp("crash-ref")))


def ckpt_kill_trial(seed: int, work: Path, reference: dict[int, bytes]) -> int:
    """Kill one owner with SIGKILL at a random moment while checkpoints are written (one
    owner lingering 100 ms before a checkpoint step); then every published checkpoint must
    verify, nothing partial may be loadable, and the newest published one must resume to the
    uninterrupted run's outputs. Returns the newest published version (0: none)."""
    import random
    import signal
    import subprocess
    import time

    from alphac.launch.plan_run import write_key
    from alphac.launch.roles import runner_for
    from alphac.launch.runner import SHM_DIR, owner_argv, remove_segments, write_peers
    from alphac.launch.runs import new_run_dir
    from alphac.plan.protocol import OP_CODE

    rng = random.Random(seed)
    victim, slow = rng.randrange(4), rng.randrange(4)
    window = rng.choice(CKPT_WINDOWS)
    d = work / f"ckpt-{seed}"
    rd = new_run_dir(work, f"kill-{seed}")
    peers = write_peers(rd / "peers", free_ports(4))
    key = write_key(rd / "run.key")
    exes = owner_exes(CRASH, session.built("crash4", CRASH, faults=True))  # ALPHAC_DELAY_* below
    args = run_arguments(d)  # one run id for every owner
    procs = []
    for o in range(4):
        env = dict(os.environ)
        if o == slow:
            env.update(ALPHAC_DELAY_AT=str(OP_CODE[window]), ALPHAC_DELAY_MS="100")
        argv = owner_argv(exes[o], o, peers, rd / f"o{o}", runner_for("x86_64"), None, 1500, key=key)
        argv += args
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env=env, start_new_session=True))
    time.sleep(rng.uniform(0.0, 0.6))
    if procs[victim].poll() is None:
        os.killpg(procs[victim].pid, signal.SIGKILL)
    for p in procs:
        p.wait(timeout=10)
    # survivors unlink the segments they created; the launcher's cleanup removes a victim's
    remove_segments([procs[victim].pid])
    assert [s for p in procs for s in SHM_DIR.glob(f"alphac-{p.pid}-*")] == [], seed
    published = sorted(int(p.name[5:]) for p in d.iterdir() if p.name.startswith("ckpt-") and "." not in p.name) \
        if d.exists() else []
    for v in published:
        assert verify(d / f"ckpt-{v}").version == v, (seed, v)
    for p in (d.iterdir() if d.exists() else ()):
        if ".partial-" in p.name:
            with pytest.raises(Exception):
                verify(p)  # a partial directory is never taken for a checkpoint
    if published and published[-1] < CRASH.updates:
        again = outputs(run("crash4", CRASH, work / f"again-{seed}", resume=d / f"ckpt-{published[-1]}"))
        assert again == reference, seed
    return published[-1] if published else 0


def test_kill_trials_while_checkpointing_leave_every_published_checkpoint_whole(crash_reference, tmp_path):
    newest = [ckpt_kill_trial(seed, tmp_path, crash_reference) for seed in range(20)]
    assert len(set(newest)) >= 3, newest  # the kills land at several points of the run


# -- failing writes -------------------------------------------------------------------------------

def test_a_checkpoint_directory_that_cannot_be_made_is_refused_before_any_work(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")
    r = run("crash4", CRASH, blocker / "ckpt")
    assert not r.committed
    errs = [oc.stderr.strip() for oc in r.result.outcomes]
    assert all(e.startswith(f"refused: io-error: cannot make the checkpoint directory '{blocker / 'ckpt'}'")
               for e in errs), errs


def test_a_full_disk_refuses_by_code_and_publishes_nothing(tmp_path):
    """A tmpfs with room for a few shards: some owner's write fails (ENOSPC) while the first
    checkpoint is written; it refuses io-error, no checkpoint is published, and the run's
    outputs are not committed."""
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        r = run("crash4", CRASH, mnt / "ckpt")
        assert not r.committed
        errs = [oc.stderr.strip() for oc in r.result.outcomes if "io-error" in oc.stderr]
        assert errs and any("No space left on device" in e for e in errs), \
            [oc.stderr for oc in r.result.outcomes]
        assert [p.name for p in (mnt / "ckpt").iterdir() if "." not in p.name] == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# -- another owner count, another tree ----------------------------------------------------------

def reshaped(dep, owners: int, topology, partitioned: bool):
    """`dep`'s learner on another owner count and tree: its samples dealt out again (the
    shares change the sums, not the learner), every owner on x86-64."""
    rows = dep.learner.samples.words.shape[0]
    shares = tuple(rows // owners + (1 if o < rows % owners else 0) for o in range(owners))
    learner = dataclasses.replace(dep.learner, samples=dataclasses.replace(dep.learner.samples, shares=shares))
    roles = (n.Role("coordinator", (0,)),) + ((n.Role("worker", tuple(range(1, owners))),) if owners > 1 else ())
    part = dep.partitioning if partitioned else n.Partitioning()
    return dataclasses.replace(dep, learner=learner, owners=owners, topology=topology, roles=roles,
                               placement=("x86_64",) * owners, partitioning=part,
                               checkpoint=n.Checkpoint(0, ""))


@pytest.mark.parametrize("src,owners,topology,partitioned", [
    ("all", 3, n.Star(), True), ("all", 4, n.Hierarchy(2), False), ("replicated", 1, n.Star(), False),
    ("state", 9, n.Hierarchy(3), True), ("replicated", 7, n.Star(), True),
])
def test_a_resume_on_another_owner_count_equals_the_oracles_continuation(written, tmp_path, src, owners,
                                                                      topology, partitioned):
    """Under a new contract the restored state is the checkpoint's, and every owner ends
    with the words of the oracle run from that state on the new deployment."""
    ckpt = written[src][0] / "ckpt-2"
    dep = reshaped(ADAM7, owners, topology, partitioned)
    key = f"reshaped-{owners}-{type(topology).__name__}-{partitioned}"
    r = run(key, dep, tmp_path / "c", resume=ckpt, new_contract=True)
    params, state = oracle_words(ADAM7, 2)
    oracle = evaluate(dep, start=(params, state, 2))
    report = compare(session.plan(key, dep), r, oracle, dep.updates)
    assert report.match, report.failures


def test_another_tree_without_a_new_contract_refuses_the_order(written, tmp_path):
    dep = reshaped(ADAM7, 7, n.Star(), True)
    r = run("reshaped-7-Star-True", dep, tmp_path / "c", resume=written["all"][0] / "ckpt-2")
    assert not r.committed
    assert all(refusal_code(oc.stderr) == "numerical-order-mismatch" for oc in r.result.outcomes), \
        [oc.stderr for oc in r.result.outcomes]


# the gate's owner counts from a 4-owner checkpoint: 4 -> 7, 4 -> 1, star <-> hierarchy
STAR4 = variant(session.deployment(f"{SPECS}/lsq_adam_star.alpha"), placement=["x86_64"] * 4)
HIER4 = variant(session.deployment(f"{SPECS}/lsq_adam_hierarchy_ckpt.alpha"), placement=["x86_64"] * 4)


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """The 4-owner star and hierarchy Adam learners, checkpointing every 2 updates."""
    out = {}
    for name, dep in (("star4", STAR4), ("hier4", HIER4)):
        d = tmp_path_factory.mktemp(f"ckpt-{name}")
        outputs(run(f"ckpt-{name}", dep, d))
        out[name] = (dep, d / "ckpt-2")
    return out


@pytest.mark.parametrize("src,owners,topology,partitioned", [
    ("hier4", 7, n.Hierarchy(2), True), ("hier4", 1, n.Star(), False), ("hier4", 4, n.Star(), True),
    ("star4", 4, n.Hierarchy(2), False), ("star4", 7, n.Hierarchy(3), True),
])
def test_a_resume_from_four_owners_equals_oracle_resume(four, tmp_path, src, owners, topology, partitioned):
    """The restored logical state is the checkpoint's (= the oracle's at version 2), and every
    owner ends with the words `alphac oracle --resume` gives for the new deployment."""
    from alphac import driver

    sdep, ckpt = four[src]
    params, state = oracle_words(sdep, 2)
    words = logical_words(ckpt, verify(ckpt))
    assert np.array_equal(words["parameters"], params) and np.array_equal(words["state"], state)
    dep = reshaped(sdep, owners, topology, partitioned)
    key = f"reshaped-{src}-{owners}-{type(topology).__name__}-{partitioned}"
    r = run(key, dep, tmp_path / "c", resume=ckpt, new_contract=True)
    oracle = driver.oracle(driver.resumed(dep, ckpt, new_contract=True))
    assert {o.version for o in oracle.owners} == {dep.updates}
    report = compare(session.plan(key, dep), r, oracle, dep.updates)
    assert report.match, report.failures
