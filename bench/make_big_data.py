"""Write out/data/big_samples.npy: the 8 samples of specs/bench/big_lsq.alpha (k = 1,000,000).

Each row is k features then a target, float64, from a fixed seed so every run writes the
same bytes. Usage: python bench/make_big_data.py [--k K] [--rows N] [--out PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=1_000_000)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--out", default=str(ROOT / "out" / "data" / "big_samples.npy"))
    args = ap.parse_args()
    rng = np.random.default_rng(20261129)
    # Features span several magnitudes so the ordered sums are order-sensitive.
    scale = 10.0 ** rng.integers(-3, 2, size=(args.rows, args.k + 1))
    rows = rng.standard_normal((args.rows, args.k + 1)) * scale / np.sqrt(args.k)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, rows.astype("<f8"))
    print(f"wrote {out}: {args.rows} samples of {args.k + 1} words ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
