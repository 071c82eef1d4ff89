"""The oracle's start point from a checkpoint: its logical words and version, after every
restore check on the checkpoint itself (`alphac.checkpoint.verify`: with a run's key its
tag, then hashes, files, versions, coverage). A checkpoint that does not verify refuses
with its code; one whose learner line names another k, m or s than the deployment's
learner, `checkpoint-learner-mismatch`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from alphac.checkpoint import CheckpointError, logical_words, verify
from alphac.ir.nodes import Learner
from alphac.oracle.refusal import Refusal

_SHAPE = re.compile(r" k (\d+) m (\d+) s (\d+)$")


@dataclass(frozen=True, eq=False)
class Start:
    """What `evaluate(dep, start=...)` reads: it unpacks as (params, state, version)."""

    params: np.ndarray  # uint64, all k parameter words
    state: np.ndarray   # uint64, all m state words
    version: int
    path: str
    learner: str        # the manifest's learner line
    sha256: str         # the manifest's sha256 trailer
    inputs: str = ""    # the manifest's inputs line
    tagged: bool = False  # its tag was checked under a key
    # fixed staleness: its history region, the S parameter versions before `version`
    # (version max(version - S + j, 0) in block j of k words); None when it holds none
    history: np.ndarray | None = None
    outer: np.ndarray | None = None  # local steps: its outer momentum b (k words), if it holds one
    states: np.ndarray | None = None  # local steps: every owner's own state (n * m words), if it holds them

    def __iter__(self):
        return iter((self.params, self.state, self.version))

    def check_learner(self, learner: Learner) -> None:
        """Refuse `checkpoint-learner-mismatch` unless the learner line names `learner`'s k, m, s."""
        shape = _SHAPE.search(self.learner)
        got = tuple(int(x) for x in shape.groups()) if shape else None
        if got != (learner.k, learner.m, learner.s):
            raise Refusal("checkpoint-learner-mismatch",
                          f"{self.path} holds a learner with k, m, s = "
                          f"{', '.join(map(str, got)) if got else '?'}; this learner has "
                          f"{learner.k}, {learner.m}, {learner.s}")


def start_of(ckpt_dir, learner: Learner | None = None, key: bytes | None = None) -> Start:
    """The checkpoint at `ckpt_dir`, verified (with a run's `key`, its tag too); with
    `learner`, its k, m and s checked."""
    try:
        m = verify(ckpt_dir, key)
        words = logical_words(ckpt_dir, m)
    except CheckpointError as err:
        raise Refusal(err.code, err.message) from None
    start = Start(words["parameters"], words["state"], m.version, str(ckpt_dir), m.learner, m.sha256,
                  m.inputs, key is not None, words.get("history"), words.get("outer"), words.get("states"))
    if learner is not None:
        start.check_learner(learner)
    return start
