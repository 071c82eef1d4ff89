"""Files for an existing engine to start every owner, `alphac launch SPEC --emit slurm|mpirun
-o DIR` (docs/launch.md): the executables are built into DIR first, then, from the role
table (alphac.launch.roles), an `srun --multi-prog` configuration and an sbatch script
(slurm), or an mpirun MPMD script and its hostfile (mpirun). Running them builds nothing:
each run makes a new run directory private to the job's user, with the run's key file
(fresh, or the one $ALPHAC_KEY names) that every owner is started with, and the owners'
outputs, named as `alphac verify` reads them.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from alphac.launch.cache import ensure_built
from alphac.launch.checkpoints import checkpoint_arguments
from alphac.launch.errors import LaunchError
from alphac.launch.hostlist import HostlistError, expand
from alphac.launch.plan_run import KEY_BYTES, KEY_NAME, owner_timeout_ms
from alphac.launch.roles import OwnerRange, owner_ranges, role_table
from alphac.launch.runner import stderr_name
from alphac.launch.runs import spec_stem
from alphac.wire import ENGINE_RANKS, output_name

ENGINES = ("slurm", "mpirun")
DEFAULT_BASE_PORT = 29000  # below Linux's ephemeral range (32768-60999) and IANA's (49152-65535)
# what an srun --multi-prog line cannot carry: it splits at blanks and substitutes %t, %o
UNSAFE = frozenset(" \t\n'\"\\%")
RUN_ID_NAME = "run.id"  # the run's id, in the run directory
RUN_ID_MARK = "@RUN_ID@"  # in the srun --multi-prog template: each run's own id


@dataclass(frozen=True)
class Emitted:
    engine: str
    executables: tuple[Path, ...]
    files: tuple[Path, ...]  # the engine's files, in the order they were written
    start: str               # the command that starts a run
    run_dir: str             # where a run's outputs go (with the part only a run knows in <>)

    def as_json(self) -> dict:
        return {"engine": self.engine, "executables": [str(p) for p in self.executables],
                "files": [str(p) for p in self.files], "start": self.start, "run_dir": self.run_dir}


def usage(message: str) -> LaunchError:
    return LaunchError("usage", message)


def host_slots(hosts: str | None, owners: int) -> list[tuple[str, int]]:
    """The hosts `--hosts` names (Slurm hostlist syntax), each with the number of owners it
    holds, in blocks: every host owners // H, the first owners % H one more. Without
    --hosts, every owner on localhost."""
    if hosts is None:
        return [("localhost", owners)]
    try:
        names = expand(hosts)
    except HostlistError as exc:
        raise usage(f"--hosts '{hosts}': {exc}") from None
    twice = next((h for i, h in enumerate(names) if h in names[:i]), None)
    if twice is not None:
        raise usage(f"--hosts '{hosts}' names host '{twice}' twice")
    if len(names) > owners:
        raise usage(f"--hosts '{hosts}' names {len(names)} hosts for {owners} owners")
    q, r = divmod(owners, len(names))
    return [(h, q + (i < r)) for i, h in enumerate(names)]


def spec_path(dep) -> str:
    return str(Path(dep.source_file).resolve()) if dep.source_file else dep.name


def _write(path: Path, text: str, executable: bool = False) -> Path:
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text)
    tmp.chmod(0o755 if executable else 0o644)
    os.replace(tmp, path)
    return path


def _header(plan, what: str, usage_lines: list[str]) -> list[str]:
    dep = plan.deployment
    return ["#!/bin/bash",
            f"# {what}, written by alphac launch: deployment {dep.name} of {spec_path(dep)}",
            f"# ({dep.owners} owners, protocol {plan.protocol_hex}); the executables beside it.",
            *[f"# {line}" for line in usage_lines]]


def _run_dir(default: str) -> list[str]:
    """The shell lines that make the run directory (new, private), its key file and a fresh
    run id (64 random bits, never zero) in $run_id and the run directory's run.id: a hello
    recorded in an earlier run names another run id, so it is refused even where the key
    is reused ($ALPHAC_KEY)."""
    return [f'run="${{ALPHAC_RUN_DIR:-{default}}}"',
            "umask 077  # the run directory and its key are the job's user's alone",
            'mkdir -p "$(dirname "$run")"',
            'mkdir "$run"',
            'run="$(realpath "$run")"',
            f'if [ -n "${{ALPHAC_KEY:-}}" ]; then cp "$ALPHAC_KEY" "$run/{KEY_NAME}"; '
            f'else head -c {KEY_BYTES} /dev/urandom > "$run/{KEY_NAME}"; fi',
            'run_id=0000000000000000',
            'while [ -z "${run_id//0/}" ]; do run_id="$(od -An -N8 -tx8 /dev/urandom | tr -d \' \\n\')"; done',
            f'echo "$run_id" > "$run/{RUN_ID_NAME}"']


def _owner_arguments(base_port: int, owner_args: tuple[str, ...]) -> list[str]:
    return ["--base-port", str(base_port), *owner_args, "--key", KEY_NAME]


def _multi_prog_line(r: OwnerRange, args: list[str]) -> str:
    """`RANKS COMMAND ARGS --out owner-%t.out` (srun substitutes the task number for %t)."""
    words = [*r.entry.command, *args]
    bad = next((w for w in words if UNSAFE & set(w)), None)
    if bad is not None:
        raise usage(f"'{bad}' cannot be written in an srun --multi-prog line (blanks, quotes, "
                    "backslashes and % are not allowed): use paths without them")
    return " ".join([r.ranks, *words, "--out", output_name("%t")])


def emit_slurm(plan, table, out: Path, base_port: int, owner_args: tuple[str, ...],
               hosts: str | None) -> tuple[list[Path], str, str]:
    dep = plan.deployment
    stem = spec_stem(dep)
    args = _owner_arguments(base_port, owner_args) + ["--run-id", RUN_ID_MARK]
    lines = [f"# srun --multi-prog template for deployment {dep.name} ({dep.owners} owners): task %t is",
             "# owner %t, in the run directory (srun --chdir), which holds the run's key file; the",
             f"# batch script writes each run's copy there with its run id in place of {RUN_ID_MARK}."]
    lines += [_multi_prog_line(r, args) for r in owner_ranges(table)]
    conf = _write(out / f"{stem}.multi-prog", "\n".join(lines) + "\n")
    runs = out / "runs"
    task_stderr = stderr_name("%t")
    directives = [f"#SBATCH --job-name=alphac-{stem}", f"#SBATCH --ntasks={dep.owners}",
                  f"#SBATCH --output={runs}/slurm-%j.out"]
    if hosts is not None:
        directives += [f"#SBATCH --nodes={len(host_slots(hosts, dep.owners))}", f"#SBATCH --nodelist={hosts}"]
    script = _header(plan, "Slurm batch script", [
        f"Submit: sbatch {out}/{stem}.sbatch   (options given to sbatch override these)",
        f"Then:   alphac verify {runs}/<job id> {spec_path(dep)}",
        "ALPHAC_RUN_DIR: the run directory, new (default runs/<job id> beside this script);",
        f"ALPHAC_KEY: a key file for the run (default {KEY_BYTES} fresh random bytes)."])
    script += directives + ["set -euo pipefail"] + _run_dir(f"{runs}/$SLURM_JOB_ID") + [
        f'sed "s/{RUN_ID_MARK}/$run_id/" {shlex.quote(str(conf))} > "$run/owners.multi-prog"',
        f'srun --chdir="$run" --distribution=block --kill-on-bad-exit=1 --error="$run/{task_stderr}" '
        '--multi-prog "$run/owners.multi-prog"']
    batch = _write(out / f"{stem}.sbatch", "\n".join(script) + "\n", executable=True)
    return [conf, batch], f"sbatch {batch}", f"{runs}/<job id>"


def emit_mpirun(plan, table, out: Path, base_port: int, owner_args: tuple[str, ...],
                hosts: str | None) -> tuple[list[Path], str, str]:
    dep = plan.deployment
    stem = spec_stem(dep)
    hostfile = _write(out / f"{stem}.hostfile", "".join(
        f"{h} slots={n}\n" for h, n in host_slots(hosts, dep.owners)))
    # inside a Slurm allocation mpirun's daemons are Slurm tasks: their ids are not the ranks
    unset = " ".join(f"-u {v}" for v in ENGINE_RANKS[0])
    args = " ".join(shlex.quote(a) for a in _owner_arguments(base_port, owner_args)) + ' --run-id "$run_id"'
    # an app context's options are its own (--wdir too): each one gets them
    contexts = [f'    -np {r.count} --wdir "$run" env {unset} {shlex.join(r.entry.command)} --hostfile "$hostfile" '
                f"--out-dir . {args}" for r in owner_ranges(table)]
    runs = out / "runs"
    script = _header(plan, "Open MPI launch script", [
        f"Run:  {out}/{stem}.mpirun [MPIRUN OPTION...]   (e.g. --allow-run-as-root --oversubscribe)",
        f"Then: alphac verify RUN_DIR {spec_path(dep)}   (RUN_DIR is printed first)",
        f"ALPHAC_HOSTFILE: the hosts, owner i in the i-th slot (default {hostfile});",
        "ALPHAC_RUN_DIR: the run directory, new (default runs/mpirun-<time>-<pid> beside this script);",
        f"ALPHAC_KEY: a key file for the run (default {KEY_BYTES} fresh random bytes)."])
    script += ["set -euo pipefail", f'hostfile="$(realpath "${{ALPHAC_HOSTFILE:-{hostfile}}}")"']
    script += _run_dir(f"{runs}/mpirun-$(date +%Y%m%dT%H%M%S)-$$") + [
        'echo "alphac: run directory $run" >&2',
        'exec mpirun --hostfile "$hostfile" --map-by slot --bind-to none "$@" \\',
        " : \\\n".join(contexts)]
    launcher = _write(out / f"{stem}.mpirun", "\n".join(script) + "\n", executable=True)
    return [hostfile, launcher], str(launcher), f"{runs}/mpirun-<time>-<pid>"


EMITTERS = {"slurm": emit_slurm, "mpirun": emit_mpirun}


def emit(plan, engine: str, out_dir: str | Path, base_port: int = DEFAULT_BASE_PORT,
         hosts: str | None = None, native: tuple[str, ...] = (), updates: int | None = None,
         deadline_s: float = 120.0, checkpoint_dir=None, resume=None, new_contract: bool = False,
         log=None) -> Emitted:
    """Build what is missing into out_dir, then write `engine`'s files there. Every owner
    gets `--updates` (if given), the `--timeout-ms` a local launch with `deadline_s` gives,
    and the checkpoint options; owners on a target in `native` run without its runner.
    LaunchError `usage` for bad hosts, a bad port or a path a file cannot carry."""
    assert engine in EMITTERS, engine
    if not 1 <= base_port <= 65535:
        raise usage(f"--base-port must be in 1..65535, not {base_port}")
    dep = plan.deployment
    host_slots(hosts, dep.owners)  # refused before anything is built
    owner_args = (("--updates", str(updates)) if updates is not None else ()) + (
        "--timeout-ms", str(owner_timeout_ms(deadline_s))) + checkpoint_arguments(checkpoint_dir, resume,
                                                                                  new_contract)
    out = Path(out_dir).resolve()
    # the owners run on other machines: the kernels for the baseline CPU
    exes = ensure_built(plan, out, log=log, cpu="baseline")
    (out / "runs").mkdir(exist_ok=True)
    files, start, run_dir = EMITTERS[engine](plan, role_table(dep, exes, native), out, base_port,
                                             owner_args, hosts)
    return Emitted(engine, tuple(exes.values()), tuple(files), start, run_dir)
