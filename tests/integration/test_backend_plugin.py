"""A backend registered by a plugin runs a real grid with no edit to sweeper.

`tests.support.lm_dummy` adds (dummy, causal_lm) through `$SWEEPER_PLUGINS` only: the
causal-LM task's preparation and job builder, its own trainer. `sweeper run` validates
the spec against the table (without the plugin, "causal_lm has no dummy backend"),
prepares the prompt/answer data, builds each job with the task's builder (one data
folder, the seed's random decoder), runs the trials on Ray, records them in MLflow
and prints Table 2 under the causal-LM selection; `summarize --evaluate` reloads each
stored best checkpoint with the backend's trainer and agrees with the record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.lm_dummy import PLUGIN
from tests.support.sweeps import client_for, new_sweep, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration

ANSWERS = {"0": "une perte de temps .", "1": "je le recommande vivement ."}


def test_a_plugin_backend_runs_a_grid_through_the_real_engine(
    tmp_path, tmp_path_factory, monkeypatch
):
    grid = {"seed": [1, 2], "init": ["random"], "framework": ["dummy"], "method": ["full"]}
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "plugin", task="causal_lm", data={"answers": ANSWERS},
        train={"epochs": 2, "batch_size": 8}, grid=grid,
    )  # fmt: skip
    refused = run_sweeper("validate", spec, timeout=120)
    assert refused.returncode == 2
    assert "grid.framework.0: causal_lm has no dummy backend (it runs on hf)" in refused.stderr

    monkeypatch.setenv("SWEEPER_PLUGINS", f"{PLUGIN},tests.support.dummy_trainer:register")
    done = run_sweeper("run", spec, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "test_exact_match" in done.stdout and "Mean test_perplexity" in done.stdout

    _, trials = runs_by_role(out, "plugin")
    assert sorted(int(r.data.tags["sweeper.seed"]) for r in trials) == [1, 2]
    client = client_for(out)
    for run in trials:
        assert run.data.tags["sweeper.framework"] == "dummy"
        assert "best_test_exact_match" in run.data.metrics, sorted(run.data.metrics)
        folder = tmp_path / run.info.run_id
        folder.mkdir()
        saved = client.download_artifacts(run.info.run_id, "trial.json", str(folder))
        job = json.loads(Path(saved).read_text(encoding="utf-8"))
        assert (job["task"], Path(job["data"]).parent.name) == ("causal_lm", "prepared")
        assert Path(job["data"]).name.startswith("lm-")
        assert not {"fairseq_data", "hf_data"} & set(job)

    evaluated = run_sweeper("summarize", spec, "--evaluate", "--no-log", timeout=300)
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    assert "2 of 2 agree" in evaluated.stdout
