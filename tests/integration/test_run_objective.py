"""The pretraining objective as a grid axis, through `sweeper run` (as sweeps/objective.yaml,
tiny): masked_lm (fairseq) and causal_lm (HF) each pretrain once, in the stage beside
the random-init trials; each framework's pretrained trials start from their own
objective's checkpoint; the summary has one group per objective and framework, one
random group per framework, and compares the objectives within each framework."""

from __future__ import annotations

import json

import pytest

from sweeper import record_names
from tests.support.sweeps import logged_summary, new_sweep, run_sweeper, runs_by_role

pytestmark = [pytest.mark.integration, pytest.mark.slow]
pytest.importorskip("fairseq")

AXIS = "model.pretrain.objective"


def test_objective_grid_pretrains_each_objective_and_compares_them(tmp_path, tmp_path_factory):
    import torch

    from sweeper.hashing import file_sha256

    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "objective",
        model={"pretrain": {"steps": 6, "batch_size": 16, "max_tokens_per_sample": 32}},
        train={"epochs": 1, "lr": 0.001},
        grid={
            "seed": [1],
            "init": ["pretrained", "random"],
            "framework": ["fairseq", "hf"],
            "params": {AXIS: ["masked_lm", "causal_lm"]},
        },
    )
    done = run_sweeper("run", spec, timeout=560)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pretraining runs beside the trials" in done.stdout

    checkpoints = {
        "causal_lm" if p.parent.name.startswith("causal_lm-") else "masked_lm": p
        for p in (out / "pretrained").glob("*/model.pt")
    }
    assert sorted(checkpoints) == ["causal_lm", "masked_lm"]  # each pretrained once
    _, trials = runs_by_role(out, "objective")
    assert len(trials) == 6
    for run in trials:
        tags, params = run.data.tags, run.data.params
        objective = params.get(AXIS)
        folder = f"{run.info.run_name}-{tags[record_names.TAG_TRIAL_KEY][:8]}"
        job = json.loads((out / "trials" / folder / "trial.json").read_text())
        started = torch.load(job["init_checkpoint"], weights_only=False)["sweeper"]
        if tags[record_names.TAG_INIT] == "random":
            assert objective is None and tags[record_names.TAG_GROUP].endswith("random/full")
            continue
        assert started["pretrained_sha256"] == file_sha256(checkpoints[objective])
        assert tags[record_names.TAG_GROUP].endswith(f"[{AXIS}={objective}]")

    parents, _ = runs_by_role(out, "objective")
    summary = logged_summary(out, parents[0].info.run_id)
    groups = {g["group"] for g in summary["groups"]}
    assert groups == {
        *(f"{f}/pretrained/full[{AXIS}={o}]" for f in ("fairseq", "hf")
          for o in ("masked_lm", "causal_lm")),
        "fairseq/random/full",
        "hf/random/full",
    }  # fmt: skip
    rows = {(c["axis"], c["kind"], c["within"]) for c in summary["comparisons"]}
    versus = f"{AXIS}=masked_lm - {AXIS}=causal_lm"
    assert {(AXIS, versus, f"{f}/pretrained/full") for f in ("fairseq", "hf")} <= rows
    assert ("init", f"pretrained[{AXIS}=causal_lm] - random", "hf/full") in rows
    assert versus in done.stdout  # the closing report prints them
