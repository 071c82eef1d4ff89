"""Logistic-regression benchmark: specs/bench/logistic64.alpha (64 features, 262,144
samples, 65,536 on each of 4 owners on this host, star, x86-64) against numpy's vectorised
full-batch step (one process) and torch + gloo on 4 processes (bench/peer_logistic.py),
measured in the same run, interleaved round by round: seconds per update.

alphac's figure is (T(N) - T(1)) / (N - 1) of the slowest owner's wall time, medians over
--repeat rounds (process start-up, loading the samples and connecting cancel); every owner
runs the compiled contribution kernel (the ordered dot product, the correctly rounded exp
of sigmoid, 64 products) over its 65,536 samples, the ordered combine and the update. numpy:
p = 1 / (1 + exp(-X w)), w -= rate X^T (p - y) / n (BLAS, numpy's exp). torch + gloo: the
same step per rank on its share, all_reduce(SUM) of the 64-word gradient. The peers' orders
and exp are their own. The last alphac run is compared with the oracle word for word (the
oracle's mpmath exp takes a while: --no-verify skips it).

The same learner stored in binary32 (specs/bench/logistic64_storage32.alpha: the samples
rounded to float32, every stored value narrowed by round32, the combine in binary32) runs
in the same rounds; the report sets its time and the bytes each owner holds and sends per
update (from the plan) beside the binary64 learner's.

    python bench/bench_logistic.py [--updates 6] [--repeat 3] [--no-verify] [--peer-python PY]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import learner_bench as lb  # noqa: E402

SPEC = ROOT / "specs" / "bench" / "logistic64.alpha"
SPEC32 = ROOT / "specs" / "bench" / "logistic64_storage32.alpha"
DATA = ROOT / "out" / "data" / "logistic64.npy"
DATA32 = ROOT / "out" / "data" / "logistic64_f32.npy"


def bytes_line(label: str, dep) -> str:
    """What each owner of `dep` holds (samples, parameters) and sends per update, from its plan."""
    from alphac import driver
    from alphac.plan.registers import sent_words
    from alphac.plan.storage import format_of

    plan = driver.plan(dep)
    held = max(o.bytes.samples for o in plan.owners)
    params = max(o.bytes.parameters for o in plan.owners)
    sent = max(8 * sent_words(o.protocol, plan.layout.k) for o in plan.owners)
    return (f"  {label:<13} {format_of(dep)}: an owner holds {held:,} sample bytes and {params:,} "
            f"parameter bytes, and sends at most {sent:,} data bytes per update")


def main() -> None:
    args = lb.options(__doc__)
    if not DATA32.is_file():
        lb.make_data(DATA, "logistic")
        DATA32.parent.mkdir(parents=True, exist_ok=True)
        import numpy as np

        np.save(DATA32, np.load(DATA).astype("<f4"))
    wide = lb.Rounds("logistic64", SPEC, DATA, "logistic", args)
    narrow = lb.Rounds("logistic64-storage32", SPEC32, DATA, "logistic", args, peers_too=False)
    u = args.updates
    wide.report("logistic regression", more=(
        f"  binary32      {narrow.per * 1e3:8.2f} ms/update (the same learner stored in binary32)  "
        f"binary32/binary64 {narrow.per / wide.per:.2f}",
        bytes_line("bytes", wide.dep), bytes_line("", narrow.dep)))
    if not args.no_verify:
        lb.verify(narrow.name, narrow.dep, narrow.run, u)


if __name__ == "__main__":
    main()
