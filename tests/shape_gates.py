"""What the learner shapes' gate tests share: the other instruction set of each target,
the skip mark of tests that run AArch64 owners, a word's float, the resume across the
instruction sets and the build of the SM86 families."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from alphac.ir.words import to_float as f64

SWAP = {"x86_64": "aarch64", "aarch64": "x86_64"}  # the other instruction set

needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None
                                or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")


def consistent(dep, kind, value: int):
    """`dep` under consistency `kind` with its number `value` (0: the synchronous learner)."""
    from alphac.ir import nodes as ir

    return dataclasses.replace(dep, consistency=ir.Consistency(kind if value else ir.ConsistencyKind.SYNCHRONOUS,
                                                               value))


def assert_launch_matches_on_mixed_instruction_sets(dep, spec: str, key: str) -> None:
    """`alphac launch` of the gate deployment `dep` (of `spec`) matches the oracle, every
    owner's words its evaluation's, on owners of both instruction sets."""
    from alphac.launch.launcher import launch
    from alphac.oracle import evaluate
    from alphac.testing import session

    report = launch(dep, out_dir=session.root() / key, spec=spec)
    assert report.match, report.failures
    assert [r.params for r in report.rows] == [w.params for w in evaluate(dep).owners]
    assert {r.target for r in report.rows} == {"x86_64", "aarch64"}


def one_owner(dep):
    """`dep` on one owner holding every sample."""
    from alphac.ir import nodes as ir

    L = dep.learner
    samples = ir.Samples(L.s, (sum(L.samples.shares),), L.samples.words)
    return dataclasses.replace(dep, learner=dataclasses.replace(L, samples=samples), owners=1,
                               roles=(ir.Role("coordinator", (0,)),), placement=dep.placement[:1])


def resume_across_instruction_sets(tmp_path, name: str, dep, version: int):
    """Run the two-owner `dep` with checkpoints; the checkpoint at `version` holds the
    oracle's words at that version; resumed with every owner on the other instruction set
    it ends with the uninterrupted run's words; resumed on one owner holding every sample (a
    new contract) it equals the oracle of that schedule from the checkpoint's state.
    Returns the uninterrupted and the resumed comparisons."""
    from alphac.testing import session
    from alphac.launch.checkpoints import run_arguments
    from alphac.launch.report import compare
    from alphac.oracle import evaluate, start_of

    def launched(key, d, directory, ckpt=None, new_contract=False):
        args = run_arguments(tmp_path / directory, ckpt, new_contract)
        run = session.run(key, d, timeout_ms=20000, extra_argv={o: args for o in range(d.owners)})
        start = None if ckpt is None else start_of(ckpt, d.learner)
        return compare(session.plan(key, d), run, evaluate(d, start=start), d.updates)

    report = launched(name, dep, "ck")
    assert report.match, [r.why for r in report.rows]
    ckpt = tmp_path / "ck" / f"ckpt-{version}"
    assert tuple(int(w) for w in start_of(ckpt, dep.learner).params) == evaluate(dep, rounds=version).params
    swapped = dataclasses.replace(dep, placement=tuple(SWAP[t] for t in dep.placement))
    resumed = launched(f"{name}-swapped", swapped, "ck2", ckpt)
    assert resumed.match, [r.why for r in resumed.rows]
    alone = launched(f"{name}-alone", one_owner(dep), "ck3", ckpt, new_contract=True)
    assert alone.match, [r.why for r in alone.rows]
    return report, resumed


def assert_sm86_family_builds(spec: str, host_spec: str, tmp_path) -> None:
    """The SM86 build family of a shape evaluates as its host realization, places its
    fragments in device memory, and builds two SM86 executables (their runs:
    tests/device/test_stub_shapes.py, through the stand-in driver)."""
    from click.testing import CliRunner

    from alphac import driver
    from alphac.commands import main
    from alphac.oracle import evaluate

    dep = driver.deployment(spec)
    assert dep.placement == ("sm86", "sm86")
    assert evaluate(dep).params == evaluate(driver.deployment(host_spec)).params
    spaces = {f.address_space for m in driver.plan(dep).shard_maps for f in m.fragments}
    assert spaces == {"device"}
    out = CliRunner().invoke(main, ["build", spec, "--all", "-o", str(tmp_path)])
    assert out.exit_code == 0, out.output
    built = [line for line in out.stdout.splitlines() if line.startswith("built ") and "  (" in line]
    assert [line.split("  (")[1].split(",")[0] for line in built] == ["sm86", "sm86"]


def hex_words(words) -> list[str]:
    """Words as `alphac launch --json` shows them."""
    return [f"{int(w):016x}" for w in words]


def assert_launch_matches_and_mutant_refused(spec: str, out, mutant: str) -> None:
    """`alphac launch SPEC --json`: exit 0, every owner's words the oracle's; with
    `--mutant MUTANT`: exit 1, every owner `oracle-mismatch` holding the words of the
    oracle's evaluation of that mutant."""
    import json

    from click.testing import CliRunner

    from alphac import driver
    from alphac.commands import main
    from alphac.oracle import evaluate

    def launched(*extra):
        result = CliRunner().invoke(main, ["launch", spec, "-o", str(out), "--json", *extra])
        return result, json.loads(result.stdout)

    result, report = launched()
    assert result.exit_code == 0 and report["match"], result.stderr
    want = evaluate(driver.deployment(spec))
    assert [(r["params"], r["state"]) for r in report["owners"]] == [
        (hex_words(w.params), hex_words(w.state)) for w in want.owners]
    result, report = launched("--mutant", mutant)
    assert result.exit_code == 1 and not report["match"] and report["mutant_match"]
    theirs = evaluate(driver.deployment(spec), mutant=mutant)
    for row, w in zip(report["owners"], theirs.owners, strict=True):
        assert (row["params"], row["state"]) == (hex_words(w.params), hex_words(w.state))
        assert row["error"].startswith(f"oracle-mismatch: owner {row['owner']} "), row["error"]


def checkpoint_launcher(tmp_path):
    """launched(key, dep, directory, ckpt=None, new_contract=False) -> (run, report): every
    owner of `dep` run with its checkpoints in tmp_path/directory, resumed from `ckpt` (a
    new contract with `new_contract`), compared with the oracle of the resumed deployment
    from the checkpoint's words (under bounded staleness, replaying the schedule the
    outputs record)."""
    from alphac import driver
    from alphac.launch.checkpoints import run_arguments
    from alphac.launch.report import compare
    from alphac.launch.results import recorded_schedule
    from alphac.oracle import evaluate, start_of
    from alphac.testing import session

    def launched(key, d, directory, ckpt=None, new_contract=False):
        args = run_arguments(tmp_path / directory, ckpt, new_contract)
        run = session.run(key, d, timeout_ms=20000, extra_argv={o: args for o in range(d.owners)})
        start = None if ckpt is None else start_of(ckpt, d.learner)
        resumed = d if ckpt is None else driver.resumed(d, str(ckpt), new_contract)
        oracle = evaluate(resumed, start=start, schedule=recorded_schedule(run.outputs, d.owners))
        return run, compare(session.plan(key, d), run, oracle, d.updates)
    return launched


def planner_refusal(dep):
    """The one diagnostic the planner refuses `dep` with (fails unless there is exactly one)."""
    from alphac import driver
    from alphac.diagnostics import CompileError

    with pytest.raises(CompileError) as refused:
        driver.plan(dep)
    (d,) = refused.value.diagnostics
    return d
