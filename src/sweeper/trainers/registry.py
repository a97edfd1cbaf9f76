"""Trainers by name, as lazy "module:Class" entries: fairseq loads only for fairseq trials."""

from __future__ import annotations

import importlib

from sweeper.trainers.base import Trainer

TRAINERS: dict[str, str] = {
    "fairseq": "sweeper.trainers.fairseq:FairseqTrainer",
    "hf": "sweeper.trainers.hf:HFTrainer",
    "dummy": "sweeper.trainers.dummy:DummyTrainer",  # no framework: for tests
}


def get_trainer(name: str) -> Trainer:
    """Instantiate the trainer registered under `name`."""
    try:
        target = TRAINERS[name]
    except KeyError:
        known = ", ".join(sorted(TRAINERS))
        raise KeyError(f"unknown trainer {name!r}; registered: {known}") from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)()
