"""Which training frameworks exist and what each supports: the trainers' plugin table.

A framework is an entry: its name, the lazy `"module:Class"` of its trainer (imported
only when a trial of that framework runs, so `sweeper --help` and the driver never load
fairseq or transformers for nothing; docs/architecture.md, invariant 4) and the
training methods it supports. Spec validation, the grid's expansion and the CLI's
`--framework` choices all ask this table, so adding a framework is one `register` call
and a Trainer class; nothing else names frameworks.

This module sits low in the layers (it imports nothing from sweeper) because the spec
loader and the grid's expansion, which are below the trainers, must ask it.

Plugins. `$SWEEPER_PLUGINS` holds comma-separated `"module:function"` names; each
function is called once, on first use of the table, and registers its entries. Every
process that may run a trial must see the variable: local Ray's workers inherit the
driver's environment; on a cluster it is set where each node's `ray start` runs (or in
a job's runtime_env). The test suite registers its `dummy` trainer this way
(`tests.support.dummy_trainer:register`); it is not shipped.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

PLUGINS_ENV = "SWEEPER_PLUGINS"


@dataclass(frozen=True)
class Framework:
    """One framework a trial may run on."""

    name: str
    """As written in `grid.framework` and recorded in the `sweeper.framework` tag."""
    trainer: str
    """`"module:Class"` of its Trainer (see `sweeper.trainers.base.Trainer`)."""
    methods: tuple[str, ...]
    """Training methods it runs (`full`, `lora`); other combinations are skipped."""
    why_not: str = ""
    """Said when a grid combination asks for a method it lacks."""


_BUILTIN = (
    Framework("fairseq", "sweeper.trainers.fairseq.fairseq_trainer:FairseqTrainer", ("full",),
              why_not="LoRA trials run on HF (PEFT) only"),
    Framework("hf", "sweeper.trainers.hf.hf_trainer:HFTrainer", ("full", "lora")),
)  # fmt: skip
_TABLE: dict[str, Framework] = {entry.name: entry for entry in _BUILTIN}
_plugins_loaded = False


def register(entry: Framework) -> None:
    """Add (or replace) a framework; plugins call this."""
    _TABLE[entry.name] = entry


def names() -> list[str]:
    """Every registered framework, built-ins first."""
    _load_plugins()
    return list(_TABLE)


def get(name: str) -> Framework:
    """The entry of `name`; KeyError naming the registered ones otherwise."""
    _load_plugins()
    try:
        return _TABLE[name]
    except KeyError:
        raise KeyError(unknown(name)) from None


def unknown(name: str) -> str:
    """The message for a framework nobody registered."""
    return f"unknown framework {name!r}; registered: {', '.join(sorted(names()))}"


def unsupported(name: str, method: str) -> str | None:
    """Why `name` cannot run `method`, or None when it can."""
    entry = get(name)
    if method in entry.methods:
        return None
    return entry.why_not or f"{name} runs {', '.join(entry.methods)} only"


def _load_plugins() -> None:
    """Call each `$SWEEPER_PLUGINS` function once (a bad name is an error, not a skip:
    a plugin silently missing would make its trials fail later, on a worker)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for item in filter(None, (p.strip() for p in os.environ.get(PLUGINS_ENV, "").split(","))):
        module, _, function = item.partition(":")
        try:
            getattr(importlib.import_module(module), function)()
        except (ImportError, AttributeError) as exc:
            raise RuntimeError(f"${PLUGINS_ENV}: cannot load {item!r}: {exc}") from exc
