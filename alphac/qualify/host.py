"""What a qualification run ran on and with: the host (CPU model, kernel, qemu, GPUs) and the
build of alphac (its version, and the git tree of the checkout it runs from, if any)."""

from __future__ import annotations

import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Gpu:
    name: str
    uuid: str
    driver: str


@dataclass(frozen=True)
class Host:
    cpu: str
    kernel: str
    qemu: str | None   # `qemu-aarch64 --version`, first line; None when not installed
    gpus: tuple[Gpu, ...]


def _output(argv: list[str]) -> str | None:
    """The command's stdout, stripped; None when it is not installed or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def cpu_model(cpuinfo: str) -> str:
    """The processor's model from /proc/cpuinfo (x86 `model name`; AArch64 `CPU implementer`
    and `CPU part`), else the machine name."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if fields.get("model name"):
        return fields["model name"]
    if fields.get("CPU part"):
        return f"implementer {fields.get('CPU implementer', '?')} part {fields['CPU part']}"
    return platform.machine()


def gpus(smi: str | None) -> tuple[Gpu, ...]:
    """The GPUs `nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader` lists."""
    out = []
    for line in (smi or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and all(parts):
            out.append(Gpu(*parts))
    return tuple(out)


def this_host() -> Host:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    qemu = _output(["qemu-aarch64", "--version"])
    smi = _output(["nvidia-smi", "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"])
    return Host(cpu_model(cpuinfo), f"{platform.system()} {platform.release()} {platform.machine()}",
                qemu.splitlines()[0] if qemu else None, gpus(smi))


@dataclass(frozen=True)
class Build:
    version: str
    git_tree: str | None   # the tree of the checkout's HEAD; None when not run from a checkout
    git_dirty: bool | None  # the checkout has changes HEAD does not hold


def this_build() -> Build:
    """alphac's version, and HEAD's tree where the package is in a git checkout of its own."""
    import alphac

    root = Path(alphac.__file__).resolve().parents[1]
    top = _output(["git", "-C", str(root), "rev-parse", "--show-toplevel"])
    if top is None or Path(top).resolve() != root:
        return Build(alphac.__version__, None, None)
    tree = _output(["git", "-C", str(root), "rev-parse", "HEAD^{tree}"])
    status = _output(["git", "-C", str(root), "status", "--porcelain"])
    return Build(alphac.__version__, tree, None if status is None else bool(status))
