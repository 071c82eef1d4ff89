"""Checkpoints as data: the manifest format, its parsing and rendering, and verification of a
checkpoint directory (docs/checkpoints.md). Independent of the planner: callers compute the
learner, contract and layout lines they expect and compare them."""

from alphac.checkpoint.directory import logical_words, verify
from alphac.checkpoint.manifest import (CheckpointError, FragmentEntry, Manifest, ShardEntry,
                                        check_tag, identity_of, parse, read_key, read_manifest, render)

__all__ = ["CheckpointError", "FragmentEntry", "Manifest", "ShardEntry", "check_tag", "identity_of",
           "logical_words", "parse", "read_key", "read_manifest", "render", "verify"]
