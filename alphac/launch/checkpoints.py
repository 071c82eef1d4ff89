"""A launch's checkpoints: where a run writes them (`checkpoint_place`), the launcher's own
key they are tagged and checked under (`checkpoint_key_file`), the owners' options for both
(`checkpoint_arguments`, `run_arguments`), and the checkpoint a run resumes, verified whole
before any owner starts (`resume_of`, `resume_start`) and checked again once they end
(`changed_since`). docs/checkpoints.md describes the checkpoints themselves.
"""

from __future__ import annotations

from pathlib import Path

from alphac.launch.errors import LaunchError
from alphac.launch.plan_run import write_key


CHECKPOINT_KEY_NAME = "checkpoint.key"  # in cache_dir(): the key a launch's checkpoints are tagged under


def checkpoint_key_file() -> Path:
    """The key file the launcher's runs tag their checkpoints with and check them by
    (`--checkpoint-key`): cache_dir()/checkpoint.key, this user's alone, made with KEY_BYTES
    random bytes the first time it is needed. A run's frame key is fresh; this one lasts, so
    that a later launch resumes what an earlier one wrote (docs/checkpoints.md, "Tags")."""
    from alphac.resources import cache_dir

    path = cache_dir() / CHECKPOINT_KEY_NAME
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            write_key(path)
        except FileExistsError:  # another launch made it a moment ago
            pass
    return path


def resume_of(dep, resume, new_contract: bool) -> tuple:
    """The checkpoint a run resumes from (the one given, else the spec's resume declaration,
    else None) and whether under a new contract."""
    declared = getattr(dep, "resume", None)
    if resume is None and declared is not None:
        return declared.path, declared.mode == "new"
    return resume, new_contract


def resume_start(path: str | Path, key_file: str | Path | None = None):
    """Verify the checkpoint at `path` whole (with `key_file`, its tag first; every hash,
    header, version and coverage) and return the oracle's starting point, read this once
    (alphac.oracle.Start: it unpacks as parameter words, state words, version)."""
    from alphac.checkpoint import CheckpointError, logical_words, read_key, verify
    from alphac.oracle.resume import Start

    try:
        key = read_key(key_file) if key_file is not None else None
        manifest = verify(path, key)
        words = logical_words(path, manifest)
    except CheckpointError as exc:
        where = f"{exc.path}:{exc.line}: " if exc.line else ""
        raise LaunchError(exc.code, f"{where}{exc.message}") from None
    # the path the owners are given (checkpoint_arguments): a link like OUT/D/latest resolved now
    return Start(words["parameters"], words["state"], manifest.version, str(Path(path).resolve()), manifest.learner,
                 manifest.sha256, manifest.inputs, key is not None)


def changed_since(start) -> str:
    """Why the checkpoint `start` was read from is no longer what was read ("" if it is):
    its root manifest's sha256 now. The owners restored it while the oracle evaluated from
    `start`; a checkpoint replaced in between would have them start from other words."""
    from alphac.checkpoint import CheckpointError, read_manifest

    try:
        now = read_manifest(start.path).sha256
    except CheckpointError as exc:
        now = f"unreadable ({exc.code}: {exc.message})"
    if now == start.sha256:
        return ""
    return (f"checkpoint-hash-mismatch: {start.path}/manifest.txt changed while the run was under way "
            f"(sha256 {start.sha256[:16]} when the oracle read it, now {now[:16]}): the oracle did not "
            "evaluate the inputs the owners restored")


def checkpoint_arguments(checkpoint_dir=None, resume=None, new_contract: bool = False,
                         key_file=None) -> tuple[str, ...]:
    """The owners' options for where checkpoints go, what they resume and, with
    `key_file`, the key their checkpoints are tagged and checked under (absolute paths)."""
    args: list[str] = []
    if checkpoint_dir is not None:
        args += ["--checkpoint-dir", str(Path(checkpoint_dir).resolve())]
    if resume is not None:
        args += ["--resume", str(Path(resume).resolve())] + (["--new-contract"] if new_contract else [])
    if key_file is not None and (checkpoint_dir is not None or resume is not None):
        args += ["--checkpoint-key", str(Path(key_file).resolve())]
    return tuple(args)


def run_arguments(checkpoint_dir=None, resume=None, new_contract: bool = False) -> tuple[str, ...]:
    """What every owner of a run is given beside its own options: a fresh run id (naming
    the run's partial checkpoint directories), where checkpoints go, what it resumes, and
    the launcher's checkpoint key (checkpoint_key_file) when it writes or resumes one."""
    import secrets

    key = checkpoint_key_file() if checkpoint_dir is not None or resume is not None else None
    return ("--run-id", secrets.token_hex(8)) + checkpoint_arguments(checkpoint_dir, resume, new_contract, key)


def checkpoint_place(dep, checkpoint_dir, first: int, last: int) -> tuple[Path | None, Path | None]:
    """Where a launch of `dep` from version `first` to `last` checkpoints, as (a directory
    of the user's, a path inside the run's directory): with `checkpoint_dir`, or an
    absolute checkpointDirectory, there, refused `checkpoint-exists` now (before anything is
    built or started) when it holds a version the run would write; otherwise RUN/D for the
    relative D (the pointer OUT/D/latest then names the newest one); (None, None) when
    `dep` never checkpoints."""
    from alphac.launch.runs import checkpoint_home, existing, scheduled

    every = dep.checkpoint.every
    if not every:
        if checkpoint_dir is not None:  # nothing is silently ignored
            raise LaunchError("usage", f"--checkpoint-dir {checkpoint_dir}: deployment {dep.name} never "
                              "checkpoints (CheckpointNever)")
        return None, None
    if checkpoint_dir is None:
        try:
            home = checkpoint_home(dep.checkpoint.directory)
        except ValueError as exc:
            raise LaunchError("usage", str(exc)) from None
        if home is not None:
            return None, home
        checkpoint_dir = dep.checkpoint.directory
    taken = existing(checkpoint_dir, scheduled(first, last, every))
    if taken:
        more = f" (and {len(taken) - 1} more of the versions this run writes)" if len(taken) > 1 else ""
        raise LaunchError("checkpoint-exists", f"{taken[0]} exists{more}; checkpoints are never "
                          "overwritten: give another --checkpoint-dir, or leave it out and the run "
                          "checkpoints into its own run directory (OUT/runs/RUN/D)")
    return Path(checkpoint_dir), None
