"""sweeper: seed × init × framework sweeps of fine-tuning trials, on Ray, recorded in MLflow.

Importing this package is cheap on purpose: torch, fairseq, transformers, ray and mlflow
load only inside the code that uses them, so `sweeper --help` answers instantly.
"""

from __future__ import annotations

__version__ = "0.1.0"
