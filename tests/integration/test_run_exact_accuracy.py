"""Recorded accuracies are exact fractions of the split, in both frameworks, and the
stored best checkpoints re-measure them bit for bit.

A real sweep (Ray, MLflow, fairseq and HF trainers, the pretraining stage) on generated
data with 187 validation and 189 test examples, sizes at which fairseq's own one-decimal
accuracy (154/187 shown as 82.4) and a mean of booleans (82.35294117647058) both differ
from `100.0 * 154 / 187`. Every validation and test accuracy a trial recorded, and its
`best_*` metrics, must be `100.0 * k / total` for an integer k; every trial's stored
predictions must count to its recorded best valid and test accuracies exactly; and
`summarize --evaluate` must find every trial's reloaded checkpoint giving exactly the
recorded test accuracy and every stored test prediction again. One seed ×
{pretrained, random} × {fairseq, hf}: four trials cover both frameworks on both kinds
of starting weights (more seeds would add time, not coverage); one epoch of 10 updates
on a 1-layer 16-dim model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweeper import record_names
from tests.support.sweeps import (
    base_spec,
    count_of,
    history,
    run_sweeper,
    runs_by_role,
    stored_predictions,
)

pytestmark = pytest.mark.integration

VALID, TEST = 187, 189


def test_every_accuracy_is_an_exact_fraction_and_reloads_exactly(tmp_path):
    pytest.importorskip("fairseq")
    out = tmp_path / "out"
    raw = base_spec(tmp_path / "corpus", "exact", out)
    raw["data"]["generate"].update(valid_size=VALID, test_size=TEST)
    raw["train"]["epochs"] = 1
    raw["grid"] = {"seed": [1], "init": ["pretrained", "random"], "framework": ["fairseq", "hf"]}
    spec = tmp_path / "exact.yaml"
    spec.write_text(yaml.safe_dump(raw), encoding="utf-8")

    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    _, trials = runs_by_role(out, "exact")
    groups = {
        (t.data.tags[record_names.TAG_FRAMEWORK], t.data.tags[record_names.TAG_INIT])
        for t in trials
    }
    assert len(trials) == 4 and len(groups) == 4, groups
    for run in trials:
        assert run.info.status == "FINISHED", run.data.tags.get(record_names.TAG_ERROR)
        metrics = run.data.metrics
        count_of(metrics[record_names.METRIC_BEST_VALID_ACC], VALID)
        count_of(metrics[record_names.METRIC_BEST_TEST_ACC], TEST)
        for key, total in (
            (record_names.METRIC_VALID_ACC, VALID),
            (record_names.METRIC_TEST_ACC, TEST),
        ):
            recorded = history(out, run.info.run_id, key)
            assert recorded, key
            for _, value in recorded:
                count_of(value, total)
        for split, total in (("valid", VALID), ("test", TEST)):
            best = stored_predictions(out, run.info.run_id, split, tmp_path / "p").at("best")
            assert len(best.correct) == total and best.step == metrics["best_step"]
            assert best.accuracy == metrics[f"best_{split}_accuracy"], (run.info.run_name, split)
    for log in (out / "trials").glob("fairseq-*/trainer.log"):  # the counts fairseq logged
        text = log.read_text(encoding="utf-8")
        assert f'"valid_total": "{VALID}"' in text and f'"test_total": "{TEST}"' in text

    report = tmp_path / "report"
    checked = run_sweeper("summarize", spec, "--evaluate", "--no-log", "--out", report)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert f"(4 of 4 agree, exactly; {4 * TEST} of {4 * TEST} test examples agree)" in (
        checked.stdout
    )
    assert "re-measured from the stored best checkpoints (exact)" in (
        report / "evaluation.md"
    ).read_text(encoding="utf-8")
    rows = json.loads(Path(report / "evaluation.json").read_text(encoding="utf-8"))
    assert {row["framework"] for row in rows} == {"fairseq", "hf"}
    for row in rows:
        assert row["agrees"] and row["exact"] and row["measured"] == row["recorded"], row
        count_of(row["measured"], TEST)
        assert (row["examples"], row["differing"]) == (TEST, [])
