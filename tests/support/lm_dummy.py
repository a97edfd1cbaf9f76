"""A test-only causal-LM backend that no source file names: the dummy trainer on the
causal-LM task.

`register` (a `$SWEEPER_PLUGINS` hook) adds the backend (dummy, causal_lm): the
causal-LM task's own preparation and job builder (`sweeper.trainers.hf.lm_trial`), the
prepared folder `lm`, and `LMDummyTrainer`, whose child is the dummy's
(`tests/support/dummy_trainer.py`: it checks the job's data folder and starting weights
exist and counts the training lines) with its curve reported as a causal LM's
measurements too: `exact_match` (the curve) and `perplexity` (falling as it rises), so
the causal-LM selection, the record and Table 2 read it as they read the hf backend's.

Only the test that runs a sweep through it names it in `$SWEEPER_PLUGINS`
(tests/integration/test_backend_plugin.py); the rest of the suite does not see it.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # the child, run by path: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sweeper import record_names
from sweeper.trainers.base import TrialJob
from sweeper.trainers.predictions import Measured
from tests.support.dummy_trainer import DummyTrainer

PLUGIN = f"{__name__}:register"


def register() -> None:
    """The `$SWEEPER_PLUGINS` hook."""
    from sweeper.backends import CAUSAL_LM, Backend, register

    register(
        Backend(
            "dummy",
            CAUSAL_LM,
            f"{__name__}:LMDummyTrainer",
            "sweeper.trainers.hf.lm_trial:build_job",
            "lm",
            ("full",),
        )
    )


def perplexity(exact_match: float) -> float:
    return round(1.0 + (100.0 - exact_match) / 10.0, 4)


class LMDummyTrainer(DummyTrainer):
    def command(self, job: TrialJob) -> list[str]:
        return [
            sys.executable,
            str(Path(__file__).resolve()),
            str(Path(job.out_dir) / record_names.TRIAL_CONFIG_FILE),
        ]

    def remeasure(self, job: TrialJob, checkpoint: Path, split: str, step: int) -> Measured:
        """The curve at the stored best step, as the child reported it there."""
        found = super().remeasure(job, checkpoint, split, step)
        measured = found.metrics["accuracy"]
        metrics = {"exact_match": measured, "perplexity": perplexity(measured)}
        return Measured(found.predictions, metrics)


def main(job_path: str) -> int:
    """The dummy child, each evaluation event also carrying the causal-LM metrics."""
    from tests.support import dummy_trainer

    emit = dummy_trainer._emit

    def with_lm_metrics(**fields: object) -> None:
        if fields.get("accuracy") is not None:
            value = float(fields["accuracy"])  # type: ignore[arg-type]
            fields["metrics"] = {"exact_match": value, "perplexity": perplexity(value)}
        emit(**fields)

    dummy_trainer._emit = with_lm_metrics
    return dummy_trainer.main(job_path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
