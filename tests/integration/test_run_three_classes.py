"""Three classes end to end, from JSON Lines with a tokenizer trained by sweeper, selected
and summarized on macro-F1.

A researcher's shape of data: `train/valid/test.jsonl` with string labels and multi-line
texts, `unlabeled.jsonl`, `labels: auto`, `model.tokenizer.train`, `select.metric:
valid_macro_f1`. A real sweep (Ray, MLflow, the fairseq and HF trainers) of one
random-init trial per framework must build 3-way heads, record accuracies that are exact
fractions of the splits and macro-F1 (per class too) at every evaluation, keep the
checkpoint of the best validation macro-F1, log the trained vocabulary and the class
order; `summarize --metric macro_f1 --evaluate` must reload both best checkpoints and
re-measure exactly the recorded test macro-F1 and accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweeper import record_names
from tests.support.sweeps import artifacts, count_of, history, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration

LABELS = ("sport", "cuisine", "musique")
TOPICS = {
    "sport": "match équipe but joueur stade course",
    "cuisine": "recette four sel pâte sauce plat",
    "musique": "concert guitare chanson piano note voix",
}
FILLER = ["le", "la", "un", "une", "avec", "pour", "dans", "sur", "très", "puis"]
SIZES = {"train": 60, "valid": 21, "test": 24}


def rows(split: str) -> list[dict[str, str]]:
    out = []
    offset = {"train": 0, "valid": 500, "test": 900}[split]
    for i in range(SIZES[split]):
        k = offset + i
        label = LABELS[k % 3]
        topic = TOPICS[label].split()
        words = [FILLER[(k * 3 + j) % len(FILLER)] for j in range(3)]
        words += [topic[(k + j) % len(topic)] for j in range(2)]
        text = " ".join(words[:3]) + "\n" + " ".join(words[3:]) + " ."
        out.append({"text": text, "label": label})
    return out


def write_jsonl(path: Path, items: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items), "utf-8")


def test_three_classes_from_jsonl_in_both_frameworks(tmp_path):
    pytest.importorskip("fairseq")
    data = tmp_path / "data"
    data.mkdir()
    for split in SIZES:
        write_jsonl(data / f"{split}.jsonl", rows(split))
    unlabeled = [{"text": " ".join(TOPICS[label].split()[::-1])} for label in LABELS] * 10
    write_jsonl(data / "unlabeled.jsonl", unlabeled)
    out = tmp_path / "out"
    raw = {
        "name": "three",
        "output_dir": str(out),
        "data": {
            "dir": str(data),
            "format": "jsonl",
            "files": {split: f"{split}.jsonl" for split in SIZES},
            "unlabeled": "unlabeled.jsonl",
            "labels": "auto",
        },
        "model": {
            "arch": {"layers": 1, "embed_dim": 16, "ffn_dim": 32, "heads": 2, "max_positions": 32},
            "tokenizer": {"train": {"vocab_size": 60}},
        },
        "train": {"epochs": 2, "batch_size": 10, "lr": 0.005, "num_classes": 3},
        "select": {"metric": "valid_macro_f1", "report": ["test_macro_f1", "test_accuracy"]},
        "grid": {"seed": [1], "init": ["random"], "framework": ["fairseq", "hf"]},
        "resources": {"cpu": 1},
        "max_concurrent": 2,
    }
    spec = tmp_path / "three.yaml"
    spec.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")

    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "tokenizer: training sentencepiece" in done.stdout
    parent, trials = runs_by_role(out, "three")
    assert len(trials) == 2
    for run in trials:
        assert run.info.status == "FINISHED", run.data.tags.get(record_names.TAG_ERROR)
        count_of(run.data.metrics[record_names.METRIC_BEST_VALID_ACC], SIZES["valid"])
        count_of(run.data.metrics[record_names.METRIC_BEST_TEST_ACC], SIZES["test"])
        profiles = [json.loads(i.dataset.profile) for i in run.inputs.dataset_inputs]
        assert profiles and all(p["labels"] == sorted(LABELS) for p in profiles)
        metrics = run.data.metrics
        for name in ("valid_macro_f1", "test_macro_f1", "test_accuracy"):
            assert "best_" + name in metrics, (run.info.run_name, name)
        valid = history(out, run.info.run_id, record_names.METRIC_VALID_MACRO_F1)
        assert len(valid) == 2, valid  # one per epoch
        best = max(valid, key=lambda point: (point[1], -point[0]))  # earliest of the best
        assert metrics[record_names.METRIC_BEST_STEP] == best[0]
        assert metrics["best_valid_macro_f1"] == best[1]
        per_class = [history(out, run.info.run_id, f"test_f1_class{c}") for c in range(3)]
        assert all(per_class), run.info.run_name
    log = next((out / "trials").glob("fairseq-*/trainer.log")).read_text(encoding="utf-8")
    assert '"valid_tp_c2"' in log and '"test_fn_c2"' in log  # the counts fairseq logged
    (parent_run,) = parent
    vocabulary = artifacts(out, parent_run.info.run_id, "vocabulary")
    assert {Path(p).name for p in vocabulary} == {"sentencepiece.model", "dict.txt"}

    (prepared,) = (out / "prepared").iterdir()
    assert json.loads((prepared / "prepared.json").read_text())["labels"] == sorted(LABELS)
    jobs = sorted(out.glob("trials/*/trial.json"))
    assert len(jobs) == 2 and all(json.loads(j.read_text())["num_classes"] == 3 for j in jobs)
    heads = _head_rows(out / "trials")
    assert heads == {"fairseq": 3, "hf": 3}, heads

    report = tmp_path / "report"
    checked = run_sweeper(
        "summarize", spec, "--metric", "macro_f1", "--evaluate", "--no-log", "--out", report
    )
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert "2 of 2 agree, exactly" in checked.stdout
    summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    assert summary["selection"]["metric"] == "valid_macro_f1"
    trial_rows = {t["run_id"]: t for t in summary["trials"]}
    evaluated = json.loads((report / "evaluation.json").read_text(encoding="utf-8"))
    assert {row["framework"] for row in evaluated} == {"fairseq", "hf"}
    for row in evaluated:
        assert row["agrees"] and row["exact"] and row["measured"] == row["recorded"], row
        assert trial_rows[row["run_id"]]["test_macro_f1"] == row["measured"]
    table1 = (report / "table1.md").read_text(encoding="utf-8")
    for row in trial_rows.values():
        assert f"{row['test_macro_f1']:.2f}" in table1


def _head_rows(trials: Path) -> dict[str, int]:
    """Output rows of each framework's classifier head in its saved checkpoints."""
    import torch
    from safetensors.torch import load_file

    (fairseq,) = trials.glob("fairseq-*/checkpoints/checkpoint_best.pt")
    state = torch.load(fairseq, map_location="cpu", weights_only=False)["model"]
    (key,) = [k for k in state if k.startswith("classification_heads.") and "out_proj.weight" in k]
    hf = sorted(trials.glob("hf-*/checkpoints/*/model.safetensors"))[-1]
    (hf_key,) = [k for k in load_file(hf) if k.endswith("out_proj.weight")]
    return {"fairseq": state[key].shape[0], "hf": load_file(hf)[hf_key].shape[0]}
