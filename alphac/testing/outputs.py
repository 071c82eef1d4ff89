"""An owner's output file written from Python (alphac.launch.results reads it), and the
code of the refusal an owner printed."""

from __future__ import annotations

import struct

from alphac.launch.results import OUT_FORMAT, OUT_FORMAT_OWNED, OUT_MAGIC, OwnerResult

REFUSED = "refused: "  # the first word of an owner's refusal line (docs/runtime.md)


def encode_result(r: OwnerResult, k: int | None = None, m: int | None = None) -> bytes:
    """The exact bytes an executable writes for `r`; format 2 when `r` names its
    coordinates (then k and m are the learner's)."""
    if r.param_coords is not None:
        words = [OUT_MAGIC, OUT_FORMAT_OWNED, r.owner, r.version, r.protocol, k, m,
                 len(r.params), len(r.state), *r.param_coords, *r.state_offsets, *r.params, *r.state]
        return struct.pack(f"<{len(words)}Q", *words)
    words = [OUT_MAGIC, OUT_FORMAT, r.owner, r.version, r.protocol,
             len(r.params), len(r.state), *r.params, *r.state]
    return struct.pack(f"<{len(words)}Q", *words)


def refusal_code(stderr: str) -> str | None:
    """The CODE of the first `refused: CODE: detail` line an owner printed, if any."""
    for line in stderr.splitlines():
        if line.startswith(REFUSED):
            return line[len(REFUSED):].split(":", 1)[0].strip()
    return None
