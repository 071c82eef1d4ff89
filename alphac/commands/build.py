"""`alphac build SPEC --role R --target T | --all [-o DIR] [--cpu LEVEL] [--mutant NAME]`:
check, plan, and build one executable per (role, target), each reported on one line; with
`--mutant`, an executed mutant's executables (a testing aid) instead of the declared
program's."""

from __future__ import annotations

import sys
import time

import click

from alphac import driver
from alphac.commands import report
from alphac.commands.report import error as _error
from alphac.commands.report import interrupted, stage_error
from alphac.diagnostics import CompileError, hinted
from alphac.launch.cache import build_stale


EPILOG = """\b
Exit status: 0 when every executable was built, 1 for an error, 2 for a usage
error. Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the build in any phase and
leave no partial executable behind; the status is 128 + the signal's number:
130, 143, 129."""


def mutant_help(what: str) -> str:
    """The --mutant option's help, for build and launch."""
    return (f"{what} an executed mutant instead of the declared program, a testing aid: its "
            "executables (named ...-mutant-NAME, with their own protocol identity) complete "
            "their communication but compute other words, so that a comparison with the oracle "
            "must catch them. " + "; ".join(f"{k}: {v}" for k, v in driver.MUTANTS.items()) + ".")


@click.command("build", epilog=EPILOG)
@click.argument("spec", type=str)
@click.option("--role", help="The role to build (see `alphac plan`); alone: on every target it is placed on.")
@click.option("--target", help=f"The target: {', '.join(driver.buildable_targets())}; alone: every "
                                "role placed on it.")
@click.option("--all", "build_all", is_flag=True, help="Build every (role, target) the placement needs.")
@click.option("-o", "--output", "out_dir", default="out", show_default=True, help="Output directory.")
@click.option("--cpu", "cpu", default="baseline", show_default=True, metavar="LEVEL",
              help="The CPU level of the x86-64 kernels: baseline, x86-64-v2, x86-64-v3, x86-64-v4 "
                   "or host (this machine's CPU); an executable built above the baseline refuses "
                   "cpu-unsupported on a CPU lacking the level's features. AArch64 kernels are "
                   "built for its baseline.")
@click.option("--mutant", type=click.Choice(list(driver.MUTANTS)), default=None, help=mutant_help("Build"))
@click.option("--deployment", "deployment", default=None, metavar="NAME",
              help="The deployment to build, where SPEC declares several.")
@click.option("--force", is_flag=True, help="Build every executable again, even those up to date.")
@click.option("--json", "as_json", is_flag=True, help="The executables built, as JSON.")
def command(spec: str, role: str | None, target: str | None, build_all: bool, out_dir: str,
            cpu: str, mutant: str | None, deployment: str | None, force: bool, as_json: bool) -> None:
    """Compile SPEC into native executables, one per role and target; one already in DIR
    for the same plan, CPU level, compiler and input files is reported up to date and
    left as it is (--force builds it again)."""
    from alphac.launch.interrupts import interruptible

    # this process is the command: a compiler it started gets SIGTERM too (see run)
    with interruptible(forward=True):
        try:
            status = report.reported("build", as_json, lambda: run(
                spec, role, target, build_all, out_dir, cpu, mutant, deployment, force))
        except KeyboardInterrupt as exc:  # before or after run's own handling
            status = interrupted(exc)
    sys.exit(status)


def select_pairs(dep, role: str | None, target: str | None, build_all: bool) -> list[tuple[str, str]]:
    """The pairs a command line asks for; TargetError for an unknown role or target."""
    roles = [r.name for r in dep.roles]
    if role is not None and role not in roles:
        raise driver.TargetError("unknown-role", hinted(f"unknown role {role!r}; roles: "
                                                        f"{', '.join(roles)}", role, roles))
    buildable = driver.buildable_targets()
    if target is not None and target not in buildable:
        code = "target-not-buildable" if target in driver.target_names() else "unknown-target"
        raise driver.TargetError(code, hinted(f"unknown target {target!r}; targets: "
                                              f"{', '.join(buildable)}", target, buildable)
                                 if code == "unknown-target" else
                                 f"target {target!r} cannot be built yet; targets: {', '.join(buildable)}")
    if build_all:
        return driver.needed(dep)
    if role is not None and target is not None:
        return [(role, target)]
    # one of the two given: every pair of the placement that matches it
    return [(r, t) for r, t in driver.needed(dep)
            if (role is None or r == role) and (target is None or t == target)]


def load_plan(spec: str, mutant: str | None = None, name: str | None = None):
    """The checked deployment's plan (its executed mutant's, if given), or None after
    printing why not."""
    try:
        return driver.plan(driver.deployment(spec, name), mutant)
    except ImportError as exc:
        _error("build-usage", f"a stage is missing from this installation ({exc})")
        return None
    except CompileError as exc:
        report.diagnostics(exc)
        return None
    except driver.MutantError as exc:
        _error(exc.code, exc.message)
        return None


def run(spec: str, role: str | None, target: str | None, build_all: bool, out_dir: str,
        cpu: str = "baseline", mutant: str | None = None, name: str | None = None,
        force: bool = False) -> int:
    """The build with its exit status; SIGINT, SIGTERM and SIGHUP are handled like Ctrl-C
    from the first step to the last, and the previous handlers restored afterwards."""
    from alphac.launch.interrupts import Interrupted, interruptible

    with interruptible() as interrupts:
        try:
            status = _run(spec, role, target, build_all, out_dir, cpu, mutant, name, force)
        except KeyboardInterrupt as exc:
            return interrupted(exc)
        except Exception:
            if interrupts.fired is None:
                raise
            status = 1
        if interrupts.fired is not None:  # an interrupt that surfaced as another error
            return interrupted(Interrupted(interrupts.fired))
        return status


def _run(spec: str, role: str | None, target: str | None, build_all: bool, out_dir: str,
         cpu: str, mutant: str | None, name: str | None, force: bool = False) -> int:
    if not build_all and role is None and target is None:
        _error("build-usage", "give --role ROLE and/or --target TARGET, or --all")
        return 2
    if build_all and (role is not None or target is not None):
        _error("build-usage", "--all builds every (role, target); give it alone")
        return 2
    the_plan = load_plan(spec, mutant, name)
    if the_plan is None:
        return 1
    try:
        pairs = select_pairs(the_plan.deployment, role, target, build_all)
        order = driver.build_order(the_plan, cpu, pairs)
    except driver.TargetError as exc:
        _error(exc.code, exc.message)
        return 1
    if not pairs:
        _error("role-not-placed", f"no owner of role {role!r} is placed on any target"
               if target is None else f"no owner is placed on {target!r}")
        return 1
    start = time.perf_counter()
    built: list[dict] = []
    report.result(executables=built)
    try:
        t0 = time.perf_counter()
        for wanted, exe, why in build_stale(the_plan, order, out_dir, force):
            info = driver.describe(exe)
            built.append({"path": str(exe), "role": wanted.role, "target": wanted.target,
                          "static": info["static"], "cpu": info["metadata"]["cpu"]["level"],
                          "size": info["size"], "seconds": round(time.perf_counter() - t0, 3),
                          "up_to_date": why is None})
            if not report.json_mode():
                verb = "up to date" if built[-1]["up_to_date"] else "built"
                print(f"{verb} {exe}  ({wanted.target}, cpu {built[-1]['cpu']}, "
                      f"{'static' if info['static'] else 'dynamic'}, {info['size']} bytes, "
                      f"{built[-1]['seconds']:.2f} s)")
            t0 = time.perf_counter()
    except CompileError as exc:
        report.diagnostics(exc)
        return 1
    except ImportError as exc:
        _error("build-usage", f"code generation is missing from this installation ({exc})")
        return 1
    except OSError as exc:  # the output directory cannot be made or written
        _error("io-error", f"{exc.filename or out_dir}: {exc.strerror or exc}")
        return 1
    except Exception as exc:  # a stage's one-line error (targets, image)
        return stage_error(exc)
    if len(pairs) > 1 and not report.json_mode():
        fresh = sum(1 for b in built if not b["up_to_date"])
        print(f"built {fresh} of {len(pairs)} executables in {time.perf_counter() - start:.2f} s"
              + (f" ({len(pairs) - fresh} up to date)" if fresh < len(pairs) else ""))
    return 0
