"""A LoRA sweep (as sweeps/lora.yaml, tiny): full fine-tuning vs LoRA r=4 and r=8 with the
real HF trainer (PEFT), real Ray and MLflow; Table 2 carries each group's trainable
parameter count, and LoRA's is a fraction of full fine-tuning's and grows with r."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper import record_names
from tests.support.sweeps import new_sweep, run_sweeper, runs_by_role

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_lora_sweep_reports_trainable_parameters(tmp_path, tmp_path_factory):
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "lora",
        train={"epochs": 1, "lr": 0.001},
        grid={
            "seed": [1],
            "init": ["random"],
            "framework": ["hf"],
            "method": ["full", "lora"],
            "params": {"lora.r": [4, 8]},
        },
    )
    done = run_sweeper("run", spec, timeout=480)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    parents, trials = runs_by_role(out, "lora")
    assert len(trials) == 3  # full ignores lora.r: one full trial, two LoRA trials
    tagged = {r.data.tags[record_names.TAG_GROUP]: r.data.tags for r in trials}
    assert sorted(tagged) == [
        "hf/random/full",
        "hf/random/lora[lora.r=4]",
        "hf/random/lora[lora.r=8]",
    ]

    from mlflow.artifacts import download_artifacts

    path = download_artifacts(
        run_id=parents[0].info.run_id,
        artifact_path="report/summary.json",
        tracking_uri=f"sqlite:///{out / 'mlflow.db'}",
    )
    groups = {g["group"]: g for g in json.loads(Path(path).read_text())["groups"]}
    counts = {name: group["trainable_params"] for name, group in groups.items()}
    assert all(len(c) == 1 for c in counts.values()), counts
    full, r4, r8 = (counts[g][0] for g in sorted(tagged))
    assert r4 < r8 < full / 2
    for name in groups:
        assert str(counts[name][0]) == tagged[name][record_names.TAG_TRAINABLE_PARAMS]
        assert f"{counts[name][0]:,}" in done.stdout  # Table 2 as printed
    assert "Trainable params" in done.stdout
