"""The device memory law of an SM86 owner: the words its kernels keep on the GPU.

An SM86 owner uploads its parameters, state (as much of them as it holds) and samples once and keeps them on the device;
each update adds nothing to that: the contributions of its samples, their local sum with the
refusal flags after it, the delivered mean and the rate live in buffers allocated once, and
under parameter partitioning the read replica too. The executable admits exactly these bytes
against the GPU's free memory before it allocates any of them (docs/targets.md, "SM86").
"""

from __future__ import annotations

from alphac.plan.memory import WORD

# the flag words after the local sum: the first failing contribution's sample, the local
# sum's key, the update's key; then (ordinal, coordinate) per sample
FLAG_WORDS = 3


def device_words(kp: int, mp: int, k: int, s: int, share: int, replica: bool) -> int:
    """Words on the device: the owner's parameters kp and state mp (its compact storage),
    samples share*s, contributions share*k, the local sum k with FLAG_WORDS + 2*share flag
    words, the mean k, the rate 1, and the read replica k when parameters are partitioned."""
    return kp + mp + share * s + share * k + k + FLAG_WORDS + 2 * share + k + 1 + (k if replica else 0)


def device_bytes(kp: int, mp: int, k: int, s: int, share: int, replica: bool) -> int:
    return WORD * device_words(kp, mp, k, s, share, replica)
