"""A causal-LM sweep through real Ray, MLflow, transformers and PEFT, kept tiny.

{full, LoRA on all-linear} on the pretrained decoder, one seed (20 pretraining steps,
one epoch of 10 updates): every trial run records loss, perplexity and exact match and
the best-checkpoint metrics of the causal-LM selection; each stored best checkpoint,
reloaded here with transformers (and PEFT for LoRA), gives the recorded test exact
match; its uploaded predictions (each answer as text) count to the recorded exact
matches; `summarize --evaluate` agrees, example by example too; a grid asking fairseq
for it exits 2 before anything is created.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.data.lm_task import read_jsonl, read_symbols
from sweeper.trainers.hf.lm_data import answer_text
from tests.support.sweeps import (
    client_for,
    new_sweep,
    run_sweeper,
    runs_by_role,
    stored_predictions,
)

pytestmark = pytest.mark.integration

ANSWERS = {"0": "une perte de temps .", "1": "je le recommande vivement ."}


def _lm_sweep(tmp_path, tmp_path_factory, name: str, grid: dict):
    return new_sweep(
        tmp_path,
        tmp_path_factory,
        name,
        task="causal_lm",
        data={"answers": ANSWERS},
        model={"pretrain": {"steps": 20, "batch_size": 16, "lr": 0.003}},
        train={"epochs": 1, "batch_size": 8, "lr": 0.001, "attention_dropout": 0.0},
        lora={"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["all-linear"]},
        grid=grid,
    )


def test_a_causal_lm_sweep_records_reloadable_best_checkpoints(tmp_path, tmp_path_factory):
    grid = {"seed": [1], "init": ["pretrained"], "framework": ["hf"], "method": ["full", "lora"]}
    spec, out = _lm_sweep(tmp_path, tmp_path_factory, "lm", grid)
    done = run_sweeper("run", spec, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "test_exact_match" in done.stdout and "Mean test_perplexity" in done.stdout

    _, trials = runs_by_role(out, "lm")
    assert len(trials) == 2
    client = client_for(out)
    for run in trials:
        metrics = run.data.metrics
        for key in ("valid_exact_match", "valid_perplexity", "test_loss", "best_test_exact_match"):
            assert key in metrics, (run.info.run_name, sorted(metrics))
        measured = _reload(client, run.info.run_id, tmp_path / run.info.run_id)
        assert measured == pytest.approx(metrics["best_test_exact_match"], abs=1e-6)
        assert run.data.tags["sweeper.predictions"] == "valid,test"
        for split in ("valid", "test"):
            stored = stored_predictions(out, run.info.run_id, split, tmp_path / f"p-{split}")
            best = stored.at("best")
            assert stored.task == "causal_lm" and best.step == metrics["best_step"]
            assert best.accuracy == metrics[f"best_{split}_exact_match"], (split, best.accuracy)
            assert all(isinstance(answer, str) for answer in best.predicted)
    counts = {
        r.data.tags["sweeper.method"]: int(r.data.tags["sweeper.trainable_params"]) for r in trials
    }
    assert counts["lora"] < counts["full"]

    evaluated = run_sweeper("summarize", spec, "--evaluate", "--no-log", timeout=300)
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    assert "2 of 2 agree" in evaluated.stdout
    assert "examples agree" in evaluated.stdout and "examples differ" not in evaluated.stdout

    # A predicted answer is text by the prepared folder's symbols: the expected answers'
    # ids read back as the answers given in the spec.
    (prepared,) = Path(out, "prepared").glob("lm-*")
    symbols = read_symbols(prepared)
    texts = {answer_text(row["answer"], symbols) for row in read_jsonl(prepared / "test.jsonl")}
    assert texts == set(ANSWERS.values())


def _reload(client, run_id: str, tmp) -> float:
    """Test exact match of a run's stored best checkpoint, loaded with transformers
    (full) or as PEFT adapters on the trial's starting decoder (LoRA)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from sweeper.trainers.hf.lm_data import AnswerDataset, measure

    tmp.mkdir()
    job = json.loads(Path(client.download_artifacts(run_id, "trial.json", str(tmp))).read_text())
    checkpoint = client.download_artifacts(run_id, "checkpoints/best", str(tmp))
    if job["method"] == "lora":
        base = AutoModelForCausalLM.from_pretrained(job["init_checkpoint"])
        model = PeftModel.from_pretrained(base, checkpoint)
    else:
        model = AutoModelForCausalLM.from_pretrained(checkpoint)
    test = AnswerDataset.read(Path(job["data"]) / "test.jsonl")
    return measure(model, test)["exact_match"]


def test_fairseq_for_a_causal_lm_sweep_exits_2_before_anything_exists(tmp_path, tmp_path_factory):
    grid = {"seed": [1], "init": ["random"], "framework": ["fairseq", "hf"]}
    spec, out = _lm_sweep(tmp_path, tmp_path_factory, "lmfairseq", grid)
    before = sorted(p.name for p in out.iterdir())
    refused = run_sweeper("run", spec, timeout=120)
    assert refused.returncode == 2
    assert "causal_lm has no fairseq backend" in refused.stderr
    assert sorted(p.name for p in out.iterdir()) == before  # no run, no prepared data
    assert runs_by_role(out, "lmfairseq") == ([], [])


def test_a_folder_that_is_no_causal_lm_exits_2_before_anything_exists(tmp_path, tmp_path_factory):
    grid = {"seed": [1], "init": ["pretrained"], "framework": ["hf"]}
    spec, out = _lm_sweep(tmp_path, tmp_path_factory, "lmfolder", grid)
    before = sorted(p.name for p in out.iterdir())
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    refused = run_sweeper(
        "run", spec, "model.pretrain=null", f"model.checkpoint={not_a_model}", timeout=120
    )
    assert refused.returncode == 2
    assert (
        "not usable as the pretrained decoder" in refused.stderr
        and "no config.json" in refused.stderr
    )
    assert sorted(p.name for p in out.iterdir()) == before
