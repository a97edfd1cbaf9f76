"""Trainers by framework name: the lazy `"module:Class"` of `sweeper.frameworks`, loaded.

Only the framework a trial runs is imported: fairseq loads for fairseq trials only.
"""

from __future__ import annotations

import importlib

from sweeper import frameworks
from sweeper.trainers.base import Trainer


def get_trainer(name: str) -> Trainer:
    """Instantiate the trainer of framework `name` (KeyError if none is registered)."""
    module_name, _, class_name = frameworks.get(name).trainer.partition(":")
    return getattr(importlib.import_module(module_name), class_name)()
