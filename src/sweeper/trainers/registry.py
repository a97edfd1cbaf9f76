"""Trainers by backend: the lazy `"module:Class"` of `sweeper.backends`, loaded.

Only the backend a trial runs is imported: fairseq loads for fairseq trials only.
"""

from __future__ import annotations

from sweeper import backends
from sweeper.record_names import TASK_CLASSIFICATION
from sweeper.trainers.base import Trainer


def get_trainer(framework: str, task: str = TASK_CLASSIFICATION) -> Trainer:
    """Instantiate the trainer of backend (framework, task) (KeyError if none is
    registered)."""
    return backends.load(backends.get(framework, task).trainer)()
