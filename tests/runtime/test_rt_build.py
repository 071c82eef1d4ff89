"""Compiling the C runtime: one cached object per target, compiler and sources; a missing
or failing compiler is a one-line TOOLING error. (The sanitized build is checked by
tests/runtime/test_rt_fuzz.py under make test-sanitize.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from alphac import driver
from alphac.targets import TargetError, load_target
from alphac.targets.elf import global_symbols
from alphac.targets.runtime import runtime_object, sources


def test_the_object_is_compiled_once_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path))
    t = load_target("x86_64")
    first = runtime_object(t)
    stamp = first.stat().st_mtime_ns
    assert runtime_object(t) == first and first.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]
    # other flags, another object (the shared-library variant is position-independent)
    assert runtime_object(t, pic=True) != first
    assert runtime_object(replace(t, cflags=("-DALPHAC_EXTRA=1",))) != first


def test_the_sources_include_the_generated_headers():
    files = sources(load_target("x86_64"))
    assert {"rt.h", "main.c", "ops.c", "cpu.c", "alphac_gen.h", "alphac_cpu.h"} <= set(files)
    assert b"#define FRAME_MAGIC UINT64_C(0x31454d4152464c41)" in files["alphac_gen.h"]
    # the features the x86-64 runtime can test, in the order of the image's cpu_required bits
    cpu = files["alphac_cpu.h"].decode()
    assert "#define CPU_CHECK_COUNT 37" in cpu
    assert '  X(0, "cmpxchg16b") \\\n  X(1, "lahf_lm") \\\n' in cpu and '  X(36, "adx") \\\n' in cpu
    assert "#define CPU_CHECK_COUNT 0" in sources(load_target("aarch64"))["alphac_cpu.h"].decode()


def test_a_missing_compiler_and_a_failing_one_are_refused_by_code(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path))
    t = load_target("x86_64")
    with pytest.raises(TargetError) as err:
        runtime_object(replace(t, cc=("alphac-no-such-cc",)))
    assert (err.value.code, err.value.message) == (
        "compiler-missing", "alphac-no-such-cc: not found (the C compiler of the role runtime)")
    with pytest.raises(TargetError) as err:
        runtime_object(replace(t, cflags=("-fno-such-option",)))
    assert err.value.code == "compile-failed"
    assert err.value.message.startswith("cc exited 1: ")
    assert list(tmp_path.iterdir()) == []  # nothing half-built is cached


def test_a_sanitized_build_is_refused_for_a_target_that_does_not_run_natively(tmp_path):
    plan = driver.plan(driver.deployment(str(Path(__file__).resolve().parents[2] / "specs" / "lsq_plain_star.alpha")))
    with pytest.raises(TargetError) as err:
        driver.build(plan, "worker", "aarch64", tmp_path, sanitize=True)
    assert (err.value.code, err.value.message) == ("target-not-buildable", "aarch64: a sanitized build runs natively only")


@pytest.mark.parametrize("name", ["x86_64", "aarch64"])
def test_the_libraries_object_defines_what_the_runtime_takes_from_them_once(name):
    from alphac.targets.runtime import libraries_object

    t = load_target(name)
    runtime = runtime_object(t)
    (libs,) = libraries_object(t, runtime)
    defined, _ = global_symbols(libs)
    _, wanted = global_symbols(runtime)
    assert {"EVP_DigestInit_ex2", "EVP_DigestUpdate", "EVP_MD_CTX_new"} <= wanted & defined
    assert not defined & global_symbols(runtime)[0]  # the runtime's own code is not in it
    stamp = libs.stat().st_mtime_ns
    assert libraries_object(t, runtime) == (libs,) and libs.stat().st_mtime_ns == stamp


def test_a_missing_library_refuses_before_the_libraries_object(tmp_path):
    from alphac.targets.runtime import libraries_object

    t = replace(load_target("x86_64"), libs=(str(tmp_path / "libabsent.a"),))
    with pytest.raises(TargetError) as err:
        libraries_object(t, tmp_path / "rt.o")
    assert err.value.code == "library-missing" and "libabsent.a" in err.value.message
