"""Macro-F1 end to end on three classes: a real fairseq and a real HF trial record it,
keep their best checkpoint by it, and `summarize --metric macro_f1` reports what the
stored checkpoints re-measure, bit for bit.

The data are the session's generated reviews relabeled into three classes (every third
example of each split becomes class 2, whatever its text), so class 2 is hard to learn:
the trials meet a class predicted rarely or never, the case that tells macro-F1 from
accuracy. The sweep selects on `valid_macro_f1` (`select:`), so the trainers keep the
checkpoint the summary picks and `--evaluate` can compare Table 1 with it. One seed ×
random init × {fairseq, hf}, two epochs of 10 updates on a 1-layer 16-dim model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from sweeper import record_names
from tests.support.sweeps import base_spec, history, run_sweeper, runs_by_role, shared

pytestmark = pytest.mark.integration

LABELS = ["0", "1", "2"]


def three_classes(corpus: Path, out: Path) -> None:
    """The corpus's splits with every third label replaced by class 2."""
    out.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        shutil.copy(corpus / f"{split}.review", out / f"{split}.review")
        labels = (corpus / f"{split}.label").read_text(encoding="utf-8").splitlines()
        relabeled = ["2" if i % 3 == 2 else label for i, label in enumerate(labels)]
        (out / f"{split}.label").write_text("\n".join(relabeled) + "\n", encoding="utf-8")


def test_macro_f1_is_recorded_selected_summarized_and_reloads_exactly(tmp_path, tmp_path_factory):
    pytest.importorskip("fairseq")
    inputs = shared(tmp_path_factory)
    data = tmp_path / "data"
    three_classes(inputs["corpus"], data)
    out = tmp_path / "out"
    raw = base_spec(inputs["corpus"], "macro", out)
    raw["data"] = {"source": "files", "dir": str(data), "labels": LABELS}
    del raw["model"]["pretrain"]
    raw["train"]["num_classes"] = 3
    raw["grid"] = {"seed": [1], "init": ["random"], "framework": ["fairseq", "hf"]}
    raw["select"] = {"metric": "valid_macro_f1", "report": ["test_macro_f1", "test_accuracy"]}
    spec = tmp_path / "macro.yaml"
    spec.write_text(yaml.safe_dump(raw), encoding="utf-8")
    out.mkdir()
    shutil.copy(inputs["store"], out / "mlflow.db")

    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    _, trials = runs_by_role(out, "macro")
    assert sorted(t.data.tags[record_names.TAG_FRAMEWORK] for t in trials) == ["fairseq", "hf"]
    for run in trials:
        assert run.info.status == "FINISHED", run.data.tags.get(record_names.TAG_ERROR)
        metrics = run.data.metrics
        for name in ("valid_macro_f1", "test_macro_f1", "test_accuracy"):
            assert "best_" + name in metrics, (run.info.run_name, name)
        valid = history(out, run.info.run_id, record_names.METRIC_VALID_MACRO_F1)
        assert len(valid) == 2, valid  # one per epoch
        best = max(valid, key=lambda point: (point[1], -point[0]))  # earliest of the best
        assert metrics[record_names.METRIC_BEST_STEP] == best[0]
        assert metrics["best_valid_macro_f1"] == best[1]
        per_class = [history(out, run.info.run_id, f"test_f1_class{c}") for c in range(3)]
        assert per_class[0] and per_class[1], run.info.run_name
    log = next((out / "trials").glob("fairseq-*/trainer.log")).read_text(encoding="utf-8")
    assert '"valid_tp_c2"' in log and '"test_fn_c2"' in log  # the counts fairseq logged

    report = tmp_path / "report"
    summarized = run_sweeper(
        "summarize", spec, "--metric", "macro_f1", "--evaluate", "--no-log", "--out", report
    )
    assert summarized.returncode == 0, summarized.stdout[-2000:] + summarized.stderr[-2000:]
    assert "test_macro_f1 re-measured from the stored best checkpoints (exact)" in summarized.stdout
    assert "2 of 2 agree." in summarized.stdout
    summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    assert summary["selection"]["metric"] == "valid_macro_f1"
    rows = {t["run_id"]: t for t in summary["trials"]}
    evaluations = json.loads((report / "evaluation.json").read_text(encoding="utf-8"))
    assert {e["framework"] for e in evaluations} == {"fairseq", "hf"}
    for evaluation in evaluations:
        assert evaluation["agrees"] and evaluation["exact"], evaluation
        assert rows[evaluation["run_id"]]["test_macro_f1"] == evaluation["measured"]
    table1 = (report / "table1.md").read_text(encoding="utf-8")
    for row in rows.values():
        assert f"{row['test_macro_f1']:.2f}" in table1
