"""Write checkpoint fixtures: version U of a spec's deployment, its words the oracle's.

    python3 scripts/make_checkpoint.py SPEC U DIR [--root-only]
    python3 scripts/make_checkpoint.py --fixtures     rewrite every fixture in FIXTURES

The checkpoint is what the deployment's owners publish after U updates
(docs/checkpoints.md): the plan's checkpoint lines and fragments
(`alphac.image.ckpt.checkpoint_lines`, `owner_fragments`), the oracle's logical words at
version U, written by `alphac.checkpoint.write`. `--root-only` writes manifest.txt alone,
without the child manifests of inner owners. The bytes depend on the spec and U only, so
regenerating a fixture gives the same files (tests/unit/test_checkpoint_format.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from alphac import driver  # noqa: E402
from alphac.image.ckpt import write_plan_checkpoint  # noqa: E402

# (spec, version, directory, root manifest only), relative to the repository root
FIXTURES = (
    ("tests/errors/checkpoints/lsq-star.alpha", 2, "tests/errors/checkpoints/lsq-star-v2", True),
)


def make(spec: str | Path, version: int, directory: str | Path, root_only: bool = False):
    """Write checkpoint `version` of SPEC's deployment into `directory` (which must not hold
    checkpoint files yet); its root manifest."""
    dep = driver.deployment(str(spec))
    if dep.resume is not None:
        raise SystemExit(f"{spec} resumes from a checkpoint; fixtures start from the initial words")
    plan = driver.plan(dep)
    words = driver.oracle(dep, rounds=version)
    return write_plan_checkpoint(plan, directory, version, words.params, words.state,
                                 manifests=not root_only)


def make_fixtures(root: Path = ROOT) -> list[Path]:
    out = []
    for spec, version, directory, root_only in FIXTURES:
        target = root / directory
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            staged = Path(tmp) / target.name
            make(root / spec, version, staged, root_only)
            if target.exists():
                shutil.rmtree(target)
            staged.rename(target)
        out.append(target)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?")
    ap.add_argument("version", nargs="?", type=int)
    ap.add_argument("directory", nargs="?")
    ap.add_argument("--root-only", action="store_true")
    ap.add_argument("--fixtures", action="store_true")
    args = ap.parse_args(argv)
    if args.fixtures:
        for path in make_fixtures():
            print(path.relative_to(ROOT))
        return 0
    if args.directory is None:
        ap.error("SPEC U DIR, or --fixtures")
    m = make(args.spec, args.version, args.directory, args.root_only)
    print(f"{args.directory}: version {m.version}, identity {m.identity:016x}, "
          f"{len(m.shards)} shards, {len(m.fragments)} fragments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
