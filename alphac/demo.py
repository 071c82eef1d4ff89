"""`make demo`: build the demo spec for every (role, target), launch every owner (AArch64
ones under qemu), and show that each finished bit-identical to the oracle.

    python -m alphac.demo [SPEC] [-o OUT_DIR]

Exit 0 only if every owner matched; the last line then reads
`demo: N owners, x86_64+aarch64, bit-identical to the oracle`.
"""

from __future__ import annotations

import argparse
import sys
import time

DEFAULT_SPEC = "specs/demo.alpha"


def targets_line(dep) -> str:
    seen: list[str] = []
    for t in dep.placement:
        if t not in seen:
            seen.append(t)
    return "+".join(seen)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m alphac.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", nargs="?", default=DEFAULT_SPEC)
    ap.add_argument("-o", "--output", default="out", help="directory for executables and runs")
    ap.add_argument("--timeout", type=float, default=120.0, help="launch deadline in seconds")
    args = ap.parse_args(argv)

    from alphac.launch.interrupts import interrupt_signal, interrupt_status, interruptible

    # Ctrl-C, SIGTERM and SIGHUP: every owner is stopped first, exit 128 + the signal (a
    # build's compiler gets SIGTERM too when this is the process's command line)
    with interruptible(forward=argv is None):
        try:
            return _demo(args)
        except KeyboardInterrupt as exc:
            import signal

            name = signal.Signals(interrupt_signal(exc)).name
            print(f"demo: interrupted by {name}; every owner was stopped", file=sys.stderr)
            return interrupt_status(exc)


def _demo(args) -> int:
    from alphac import driver
    from alphac.commands.launch import load, print_failures, table
    from alphac.commands.report import diagnostics as print_diagnostics
    from alphac.diagnostics import CompileError
    from alphac.launch.cache import ensure_built
    from alphac.launch.errors import LaunchError
    from alphac.launch.launcher import launch

    dep = load(args.spec)
    if dep is None:
        return 1
    try:
        plan = driver.plan(dep)
        t0 = time.monotonic()
        exes = ensure_built(plan, args.output, log=lambda m: print(f"demo: {m}"))
        built = time.monotonic() - t0
        print(f"demo: {len(exes)} executables ready in {built:.2f} s: "
              + ", ".join(p.name for p in exes.values()))
        print(f"demo: protocol {plan.protocol_hex}, {dep.owners} owners, "
              f"{dep.updates} updates, placement {' '.join(dep.placement)}")
        report = launch(dep, out_dir=args.output, deadline_s=args.timeout, spec=args.spec,
                        plan=plan)
    except CompileError as exc:
        print_diagnostics(exc)
        return 1
    except LaunchError as exc:
        print(f"demo: error[{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    print(table(report))
    print_failures(report)
    if not report.match:
        bad = sum(not r.match for r in report.rows)
        print(f"demo: FAILED: {bad} of {dep.owners} owners did not match the oracle")
        return 1
    print(f"demo: {dep.owners} owners, {targets_line(dep)}, bit-identical to the oracle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
