"""Statistics of prepared data: what a researcher checks before trusting a run.

A silent tokenisation problem (most tokens `<unk>`, half the reviews truncated, one
class missing from a split) looks like a bad model later; printed up front it is a
one-line fix. The same dict is written to `stats.json` and kept in `PreparedData`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweeper.data.encode import EncodedSplit


def split_stats(split: EncodedSplit, label_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Per-split numbers (a pair's two texts count together). Lengths count tokens
    without `<s>`/`</s>` and before
    truncation (`max_length` shows how far over the limit the data goes); `tokens` is
    what the model is fed, after truncation; `unk_rate` is `<unk>` / tokens before it."""
    n = len(split.ids)
    raw_tokens = sum(split.raw_lengths)
    kept = split.kept_lengths()
    stats: dict[str, Any] = {
        "sentences": n,
        "tokens": sum(kept),
        "mean_length": round(raw_tokens / n, 2) if n else 0.0,
        "max_length": max(split.raw_lengths, default=0),
        "truncated": sum(1 for k, raw in zip(kept, split.raw_lengths, strict=True) if raw > k),
        "empty": sum(1 for raw in split.raw_lengths if raw == 0),
        "unk_rate": round(split.unknown / raw_tokens, 6) if raw_tokens else 0.0,
    }
    if split.labels is not None and label_names is not None:
        counts = [0] * len(label_names)
        for label in split.labels:
            counts[label] += 1
        stats["class_counts"] = dict(zip(label_names, counts, strict=True))
        stats["class_balance"] = {
            name: round(count / n, 4) if n else 0.0
            for name, count in zip(label_names, counts, strict=True)
        }
    return stats


def format_stats(stats: dict[str, Any]) -> str:
    """A fixed-width table of `stats` (the dict `prepare` writes to stats.json)."""
    head = (
        f"{'split':<15}{'sentences':>10}{'tokens':>9}{'mean len':>9}{'max len':>8}"
        f"{'truncated':>10}{'unk %':>7}  classes"
    )
    limit = stats["max_positions"]
    fits = (
        f"pairs of at most {limit - 4} tokens + <s> A </s></s> B </s>"
        if stats.get("pairs")
        else f"at most {limit - 2} tokens + <s> + </s>"
    )
    rows = [
        f"vocabulary: {stats['vocab_size']} = 4 specials + {stats['dict_entries']} dict "
        f"entries + <mask>; max_positions {limit} ({fits})",
    ]
    if stats.get("labels"):
        rows.append(
            "classes: " + "  ".join(f"{k}={label}" for k, label in enumerate(stats["labels"]))
        )
    rows.append(head)
    named = [(name, s) for name, s in stats["splits"].items()]
    named += [(f"pretrain/{name}", s) for name, s in (stats.get("pretrain") or {}).items()]
    for name, s in named:
        classes = "  ".join(
            f"{label}: {count} ({100 * s['class_balance'][label]:.1f}%)"
            for label, count in s.get("class_counts", {}).items()
        )
        row = (
            f"{name:<15}{s['sentences']:>10}{s['tokens']:>9}{s['mean_length']:>9.1f}"
            f"{s['max_length']:>8}{s['truncated']:>10}{100 * s['unk_rate']:>7.2f}  {classes}"
        )
        rows.append(row.rstrip())
    return "\n".join(rows)
