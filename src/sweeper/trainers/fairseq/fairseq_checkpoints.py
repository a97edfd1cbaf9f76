"""fairseq's checkpoint files, as every module that reads or writes them names them.

A leaf module (it imports nothing from sweeper): the trainer (which lists a finished
trial's checkpoints), its subprocess entry point (which repairs and prunes them), the
`--evaluate` reloader and pretraining all need the same two names and the same loader
allow-list, and importing them from one another tied those modules into a cycle.
"""

from __future__ import annotations

BEST = "checkpoint_best.pt"
"""The checkpoint at the best validation point (ties: the earliest; see fairseq_main)."""
LAST = "checkpoint_last.pt"
"""The latest checkpoint: what a retried or resumed trial continues from."""


def allow_fairseq_checkpoints() -> None:
    """Let torch's weights-only loader read fairseq checkpoints: their only non-tensor
    class is the `argparse.Namespace` of legacy model args, so that one class is
    allow-listed, nothing broader. Call it before `RobertaModel.from_pretrained` or
    fairseq's own loaders under torch >= 2.6."""
    import argparse

    import torch

    torch.serialization.add_safe_globals([argparse.Namespace])
