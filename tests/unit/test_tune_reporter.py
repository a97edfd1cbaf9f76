"""The trial-side half of the sweep engine: events -> Tune reports, without Ray."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from sweeper import record_names
from sweeper.trainers.base import Checkpoints
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.runner import TrialResult
from sweeper.tune.trainable import (
    CONFIG_KEY,
    CORRECTIONS,
    FINAL,
    POINTS,
    Reporter,
    event_points,
)
from sweeper.tune.tuner import TrialNames


def _train(step: int, loss: float = 0.5) -> MetricEvent:
    return MetricEvent(step=step, epoch=step / 10, split="train", loss=loss, lr=1e-4)


def _eval(step: int, split: str, acc: float, wall: float = 1.0) -> MetricEvent:
    return MetricEvent(
        step=step, epoch=step / 10, split=split, loss=1 - acc / 100, accuracy=acc, wall_time=wall
    )  # type: ignore[arg-type]


def test_event_points_name_every_metric_by_layout():
    assert event_points(_train(5)) == [
        [5, record_names.METRIC_TRAIN_LOSS, 0.5],
        [5, record_names.METRIC_LR, 1e-4],
    ]
    valid = dict((k, v) for _, k, v in event_points(_eval(10, "valid", 80.0, wall=3.5)))
    assert valid == {
        record_names.METRIC_VALID_LOSS: 1 - 0.8,
        record_names.METRIC_VALID_ACC: 80.0,
        record_names.METRIC_EPOCH: 1.0,
        record_names.METRIC_WALL_TIME: 3.5,
    }
    test = {k for _, k, _ in event_points(_eval(10, "test", 70.0))}
    assert test == {record_names.METRIC_TEST_LOSS, record_names.METRIC_TEST_ACC}
    assert event_points(MetricEvent(step=3, epoch=0.3, split="train", loss=None, lr=None)) == []


def test_one_report_per_validation_point_once_valid_and_test_arrived():
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1", versions='{"torch":"2.13.0"}')
    for step in (1, 2):
        reporter.on_event(_train(step))
    reporter.on_event(_eval(2, "valid", 60.0))
    assert sent == []  # the test event of step 2 has not arrived yet
    reporter.on_event(_eval(2, "test", 55.0, wall=2.5))
    assert len(sent) == 1
    report = sent[0]
    assert (report["step"], report["valid_accuracy"], report["test_accuracy"]) == (2, 60.0, 55.0)
    assert report["wall_time"] == 2.5 and report["node"] == "n1"
    assert report["versions"] == '{"torch":"2.13.0"}'
    steps_keys = {(s, k) for s, k, _ in report[POINTS]}
    assert (1, record_names.METRIC_TRAIN_LOSS) in steps_keys and (
        2,
        record_names.METRIC_TEST_ACC,
    ) in steps_keys
    # points go out once: the next report carries only what came after
    reporter.on_event(_eval(4, "test", 58.0))
    reporter.on_event(_train(3))
    reporter.on_event(_eval(4, "valid", 62.0))
    assert len(sent) == 2
    assert {s for s, _, _ in sent[1][POINTS]} == {3, 4}


def test_flush_and_finish_send_the_remaining_points(tmp_path: Path):
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1")
    reporter.flush()
    assert sent == []  # nothing pending: no empty report
    reporter.on_event(_train(7))
    reporter.flush()
    assert sent[-1]["step"] == 7 and sent[-1][POINTS] == event_points(_train(7))
    reporter.on_event(_train(8))
    result = TrialResult(tmp_path, [], Checkpoints(None, None), 12.0, (10, 20))
    reporter.finish(result)
    final = sent[-1]
    assert final[FINAL] is True
    assert (final["trainable_params"], final["total_params"], final["wall_time"]) == (10, 20, 12.0)
    assert final[POINTS] == event_points(_train(8))
    assert record_names.REPORT_TAGS not in final  # no seeds measured, no predictions written


def test_the_final_report_carries_the_seed_evidence_as_tags(tmp_path: Path):
    import json

    from sweeper.trainers.seed_evidence import SeedEvidence, evidence_tags

    evidence = SeedEvidence(tmp_path, {"init": 1, "data_order": 2, "dropout": 1}, examples=2)
    evidence.record["start_weights"] = "ab" * 32  # as `started` writes it, without torch
    evidence.epoch(1, [1, 0])
    sent: list[dict] = []
    Reporter(sent.append, node="n1").finish(
        TrialResult(tmp_path, [], Checkpoints(None, None), 1.0, None)
    )
    tags = json.loads(sent[-1][record_names.REPORT_TAGS])
    assert tags == evidence_tags(tmp_path)
    assert tags[record_names.TAG_START_WEIGHTS] == "ab" * 8
    assert len(tags[record_names.TAG_DATA_ORDER]) == 16


def test_the_final_report_names_the_uploaded_predictions(tmp_path: Path):
    import json

    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1")
    reporter.finish(
        TrialResult(tmp_path, [], Checkpoints(None, None), 1.0, None), ["valid", "test"]
    )
    assert sent[-1][FINAL] is True
    tags = json.loads(sent[-1][record_names.REPORT_TAGS])
    assert tags == {record_names.TAG_PREDICTIONS: "valid,test"}


def test_trial_names_follow_the_sweep_names():
    names = TrialNames({"k1": "hf-random-full-s1-k1"})
    assert (
        names(SimpleNamespace(config={CONFIG_KEY: "k1"}, trial_id="abc")) == "hf-random-full-s1-k1"
    )
    assert names(SimpleNamespace(config={}, trial_id="abc")) == "abc"


def test_a_restarted_trial_replays_its_history_once():
    """What the folder holds is sent first (the driver may have missed it); what the
    resumed trainer re-emits for those steps is not sent again, later steps are."""
    history = [_train(5), _eval(10, "valid", 60.0), _eval(10, "test", 58.0), _train(12)]
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1")
    reporter.replay(history)
    assert [r.get("valid_accuracy") for r in sent] == [60.0, None]  # the pair, then a flush
    assert {s for r in sent for s, _, _ in r[POINTS]} == {5, 10, 12}
    sent.clear()
    for event in (_train(12), _train(14), _eval(20, "valid", 61.0), _eval(20, "test", 59.0)):
        reporter.on_event(event)  # the trainer resumed from its step-10 checkpoint
    assert len(sent) == 1 and sent[0]["step"] == 20
    assert {s for s, _, _ in sent[0][POINTS]} == {14, 20}


def test_replay_completes_a_pair_cut_in_half():
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1")
    reporter.replay([_eval(10, "valid", 60.0)])  # killed before the test event
    assert sent[-1].get("valid_accuracy") is None
    reporter.on_event(_eval(10, "valid", 60.0, wall=9.0))  # re-emitted, same: not resent
    reporter.on_event(_eval(10, "test", 58.0))
    assert (sent[-1]["valid_accuracy"], sent[-1]["test_accuracy"]) == (60.0, 58.0)
    assert [k for _, k, _ in sent[-1][POINTS]] == [
        record_names.METRIC_TEST_LOSS,
        record_names.METRIC_TEST_ACC,
    ]
    assert sent[-1][CORRECTIONS] == []  # the clock alone is no correction


def test_a_step_measured_again_with_other_values_is_sent_as_a_correction(tmp_path: Path):
    """A save failed after an evaluation; the trainer resumed from the checkpoint before
    and measured that step again, not identically: the new values stand, in MLflow and
    for the best checkpoint, as they do in the events file."""
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1")
    reporter.replay([_train(5, loss=0.7), _eval(10, "valid", 70.0), _eval(10, "test", 64.0)])
    sent.clear()
    for event in (_train(5, loss=0.7), _eval(10, "valid", 66.0), _eval(10, "test", 61.0)):
        reporter.on_event(event)
    reporter.on_event(_train(12))
    reporter.finish(TrialResult(tmp_path, [], Checkpoints(None, None), 3.0, None))
    corrected = {(s, k): v for r in sent for s, k, v in r[CORRECTIONS]}
    assert corrected[(10, record_names.METRIC_VALID_ACC)] == 66.0
    assert corrected[(10, record_names.METRIC_TEST_ACC)] == 61.0
    assert (5, record_names.METRIC_TRAIN_LOSS) not in corrected  # measured the same
    assert (10, record_names.METRIC_EPOCH) not in corrected  # the same epoch: not logged twice
    best = {k: v for _, k, v in sent[-1][POINTS] if k in record_names.BEST_METRIC_NAMES}
    assert (best[record_names.METRIC_BEST_VALID_ACC], best[record_names.METRIC_BEST_TEST_ACC]) == (
        66.0,
        61.0,
    )


def test_the_final_report_carries_the_best_checkpoint_of_every_attempt(tmp_path: Path):
    """The best point may lie in the replayed history (an earlier attempt): it counts;
    a later tie does not displace it (earliest step wins, as in Table 1)."""
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1")
    reporter.replay([_eval(10, "valid", 70.0), _eval(10, "test", 64.0)])
    for event in (_eval(20, "valid", 70.0), _eval(20, "test", 66.0), _train(25)):
        reporter.on_event(event)
    reporter.finish(TrialResult(tmp_path, [], Checkpoints(None, None), 3.0, None))
    best = {k: (s, v) for s, k, v in sent[-1][POINTS] if k in record_names.BEST_METRIC_NAMES}
    assert best == {
        record_names.METRIC_BEST_VALID_ACC: (25, 70.0),
        record_names.METRIC_BEST_TEST_ACC: (25, 64.0),
        record_names.METRIC_BEST_STEP: (25, 10),
        record_names.METRIC_BEST_EPOCH: (25, 1.0),
    }


def test_a_trial_without_validation_reports_no_best_checkpoint(tmp_path: Path):
    sent: list[dict] = []
    reporter = Reporter(sent.append, node="n1")
    reporter.on_event(_train(3))
    reporter.finish(TrialResult(tmp_path, [], Checkpoints(None, None), 3.0, None))
    assert not [k for _, k, _ in sent[-1][POINTS] if k in record_names.BEST_METRIC_NAMES]
