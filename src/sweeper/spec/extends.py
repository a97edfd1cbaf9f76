"""`extends:`: a sweep file built on another one.

The shipped sweeps share one data/model block; writing it once (`demo.yaml`) and
naming it as a base (`extends: demo.yaml`) keeps the variants from drifting apart.
The rules are the ones a reader guesses: the base is named relative to the file that
extends it; mappings merge key by key with the extending file winning; a list or a
scalar replaces the base's value whole (a `grid.seed` written in a variant is *the*
seed list, not an addition); chains are allowed, cycles are errors naming the chain.

Paths inside a base stay relative to the base's own folder: a file in another folder
may extend it without its `data.dir` suddenly pointing somewhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXTENDS = "extends"

PATH_FIELDS: tuple[tuple[str, ...], ...] = (
    ("output_dir",),
    ("data", "dir"),
    ("model", "sentencepiece"),
    ("model", "dictionary"),
    ("model", "checkpoint"),
)
"""The spec's `SpecPath` fields (tests/unit/test_spec.py keeps this list in step with
`sweeper.spec.schema`)."""


class ChainError(Exception):
    """An `extends:` that names no readable base, or closes a cycle."""


def base_of(raw: dict[str, Any], path: Path) -> Path | None:
    """The file `raw` (read from `path`) extends, resolved against `path`'s folder."""
    named = raw.get(EXTENDS)
    if named is None:
        return None
    if not isinstance(named, str) or not named.strip():
        raise ChainError(f"`{EXTENDS}` must name one sweep file (got {named!r})")
    return (path.parent / Path(named).expanduser()).resolve()


def check_cycle(chain: list[Path], base: Path) -> None:
    """Raise when `base` is already in the chain being read."""
    if base in chain:
        shown = " -> ".join(p.name for p in [*chain, base])
        raise ChainError(f"`{EXTENDS}` makes a cycle: {shown}")


def spec_files(path: str | Path) -> list[Path]:
    """A valid sweep file and the bases it extends, nearest first: what the run's
    record keeps beside the resolved spec (call after the spec has loaded)."""
    import yaml

    chain: list[Path] = []
    current: Path | None = Path(path).resolve()
    while current is not None and current not in chain:
        chain.append(current)
        raw = yaml.safe_load(current.read_text(encoding="utf-8"))
        current = base_of(raw, current) if isinstance(raw, dict) else None
    return chain


def rebase_paths(raw: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A copy of a base's mapping with its relative path fields made absolute against
    the base's own folder (strings with `${...}` are rebased after interpolation)."""
    out = _copy(raw)
    for loc in PATH_FIELDS:
        node = out
        for part in loc[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        value = node.get(loc[-1])
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            node[loc[-1]] = str((folder / Path(value).expanduser()).resolve())
    return out


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` laid on `base`: mappings merge recursively, anything else replaces."""
    out = _copy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = _copy(value)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
