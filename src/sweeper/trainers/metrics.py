"""Accuracy from counts: the one expression every trainer and `--evaluate` use.

A recorded accuracy is always `accuracy_percent(correct, total)` on integer counts:
fairseq's criterion (`fairseq_main.exact_accuracy`) and its log parser
(`fairseq.parse_log_line`), HF's `compute_metrics` (`hf_data.compute_accuracy`), the
causal LM's exact match (`lm_data.measure`) and the reload of a stored checkpoint
(`reload.py`). IEEE division of the same two integers gives the same float on every
machine, so a trial's logged value, the value its framework chose its best checkpoint
on and the value re-measured from that checkpoint are equal bit for bit, not merely
close, whenever the predictions are the same. Nothing here imports anything heavy.
"""

from __future__ import annotations


def accuracy_percent(correct: int, total: int) -> float:
    """`100.0 * correct / total`: the percentage (0-100) of `total` examples that are
    right, unrounded. Counts are Python ints (convert tensors with `int()` first); an
    empty split has no accuracy and is an error, never 0 or NaN."""
    if total <= 0:
        raise ValueError(f"accuracy of {total} examples: the split is empty")
    return 100.0 * correct / total
