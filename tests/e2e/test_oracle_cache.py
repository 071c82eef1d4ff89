"""The oracle's kept results (alphac/launch/oracle_cache.py): a second launch of a plan
compares with the words the first kept, without evaluating; a damaged file, another update
count, another placement or --fresh-oracle evaluates again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from alphac import driver
from alphac.launch import oracle_cache
from alphac.launch.launcher import launch

SPEC = Path(__file__).resolve().parents[2] / "specs" / "lsq_plain_star.alpha"


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """An empty directory of kept results (the rest of the cache, the runtime's objects,
    as it is), and the oracle's evaluations counted."""
    monkeypatch.setattr(oracle_cache, "directory", lambda: tmp_path / "cache" / "oracle-results")
    calls = []
    real = driver.oracle

    def oracle(dep, rounds=None, mutant=None, tick=None, schedule=None):
        calls.append((rounds, mutant))
        return real(dep, rounds, mutant, tick=tick, schedule=schedule)

    monkeypatch.setattr(driver, "oracle", oracle)
    return calls


def _launch(tmp_path, dep, **kw):
    report = launch(dep, out_dir=tmp_path / "out", rounds=3, deadline_s=300, **kw)
    assert report.match, report.failures
    return report


def test_a_second_launch_compares_with_the_kept_words(tmp_path, counted):
    dep = driver.deployment(str(SPEC))
    _launch(tmp_path, dep)
    assert counted == [(3, None)]
    kept = list((tmp_path / "cache" / "oracle-results").glob("*.bin"))
    assert len(kept) == 1
    _launch(tmp_path, dep)
    assert counted == [(3, None)]  # not evaluated again
    key = oracle_cache.key(dep, driver.plan(dep).protocol_hex, 3, None)
    assert kept[0].name == f"{key}.bin"
    from alphac.oracle import evaluate

    assert oracle_cache.load(key) == evaluate(dep, 3)  # every word, version and digest


def test_a_damaged_result_is_evaluated_again(tmp_path, counted):
    dep = driver.deployment(str(SPEC))
    _launch(tmp_path, dep)
    (path,) = (tmp_path / "cache" / "oracle-results").glob("*.bin")
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # one bit of the last word
    path.write_bytes(bytes(data))
    assert oracle_cache.load(path.stem) is None
    _launch(tmp_path, dep)
    assert counted == [(3, None), (3, None)]


def test_another_update_count_placement_or_a_fresh_oracle_evaluates_again(tmp_path, counted):
    dep = driver.deployment(str(SPEC))
    _launch(tmp_path, dep)
    launch(dep, out_dir=tmp_path / "out", rounds=2, deadline_s=300)
    assert counted == [(3, None), (2, None)]
    _launch(tmp_path, dep, oracle_cache=False)
    assert counted == [(3, None), (2, None), (3, None)]
    plan = driver.plan(dep)
    other = replace(dep, placement=tuple(reversed(dep.placement)))
    assert oracle_cache.key(other, plan.protocol_hex, 3, None) != oracle_cache.key(dep, plan.protocol_hex, 3, None)
    assert oracle_cache.key(dep, plan.protocol_hex, 3, "swap-branch") != oracle_cache.key(dep, plan.protocol_hex, 3, None)


def test_fresh_oracle_is_refused_with_emit(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "alphac", "launch", str(SPEC), "--emit", "slurm", "--fresh-oracle",
                           "-o", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--fresh-oracle goes with a local launch" in done.stderr
