"""Dataset lineage: which prepared data a run trained and was measured on.

The run page's Datasets column and the runs table's dataset filter read MLflow's run
inputs (`log_inputs`). A prepared folder is one dataset per split, so each split is
its own MLflow dataset, `<data dir name>/<split>` (MLflow keeps one context per dataset
and run, so one dataset with three contexts would show only the first). The digest is
the prepare cache key (`stats.json` "hash", the prepared folder's name): two runs show
the same digest exactly when they read the same token ids. The profile holds the split's
sentence and token counts and the labels in class order (class k is `labels[k]`, also
with `data.labels: auto`); the source is the prepared folder on the driver.

The vocabulary the ids come from (the sentencepiece model and fairseq `dict.txt`, given
or trained by sweeper) is logged on the sweep's parent run under `vocabulary/`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.data.prepared import MANIFEST_FILE, STATS_FILE

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import DatasetInput

    from sweeper.spec.schema import SweepSpec
    from sweeper.trainers.trial_pipeline import SweepInputs

SPLITS = ("train", "valid", "test")
CONTEXT_TAG = "mlflow.data.context"
VOCABULARY_ARTIFACTS = "vocabulary"


def dataset_inputs(prepared_dir: Path, data_name: str) -> list[DatasetInput]:
    """One input per split of the prepared folder; none for a folder without the
    `stats.json` that `prepare` writes (nothing to say what it holds)."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    found = Path(prepared_dir) / STATS_FILE
    if not found.is_file():
        return []
    stats = json.loads(found.read_text(encoding="utf-8"))
    inputs = []
    for split in SPLITS:
        counts = stats["splits"].get(split)
        if counts is None:
            continue
        profile = {k: counts[k] for k in ("sentences", "tokens") if k in counts}
        if "labels" in stats:
            profile["labels"] = stats["labels"]
        dataset = Dataset(
            name=f"{data_name}/{split}",
            digest=str(stats["hash"]),
            source_type="local",
            source=json.dumps({"uri": Path(prepared_dir).resolve().as_uri()}),
            profile=json.dumps(profile),
        )
        inputs.append(DatasetInput(dataset, [InputTag(CONTEXT_TAG, split)]))
    return inputs


def sweep_lineage(spec: SweepSpec, inputs: SweepInputs) -> list[DatasetInput]:
    """The inputs of every run of a sweep: its prepared folder (`SweepInputs.root`, the
    parent of the folders trials read), named after the data folder."""
    return dataset_inputs(inputs.root, Path(spec.data.dir).name)


def log_lineage(client: MlflowClient, run_ids: list[str], inputs: list[DatasetInput]) -> None:
    """Attach the inputs to each run (MLflow ignores an input a run already has)."""
    if not inputs:
        return
    for run_id in run_ids:
        client.log_inputs(run_id, datasets=inputs)


def log_vocabulary(client: MlflowClient, run_id: str, prepared_dir: Path) -> None:
    """The prepared folder's sentencepiece model and `dict.txt` as `vocabulary/` artifacts
    of `run_id` (nothing for a folder without a manifest naming them)."""
    try:
        manifest = json.loads((Path(prepared_dir) / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    for key in ("sentencepiece", "dictionary"):
        path = Path(manifest.get(key) or "")
        if path.is_file():
            client.log_artifact(run_id, str(path), VOCABULARY_ARTIFACTS)
