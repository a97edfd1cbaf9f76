"""The per-example predictions file: round trip, its checks, pairing by example id."""

from __future__ import annotations

import pytest

from sweeper.trainers import predictions
from sweeper.trainers.metrics import accuracy_percent
from sweeper.trainers.predictions import CheckpointPredictions, SplitPredictions


def _split(ids, correct_best, correct_last=None):
    best = CheckpointPredictions(
        step=10,
        predicted=tuple(1 - c for c in correct_best),
        scores=tuple(0.5 + 0.1234567 * c for c in correct_best),
        correct=tuple(correct_best),
    )
    found = {"best": best}
    if correct_last is not None:
        found["last"] = CheckpointPredictions(
            20, tuple(correct_last), tuple(0.9 for _ in correct_last), tuple(correct_last)
        )
    return SplitPredictions("test", "classification", tuple(ids), found)


def test_a_file_round_trips_and_its_accuracy_is_the_counted_one(tmp_path):
    split = _split([0, 1, 2, 3, 4, 5, 6], [1, 0, 1, 1, 0, 1, 1], [1, 1, 1, 1, 0, 1, 1])
    path = predictions.write(tmp_path, split)
    assert path == tmp_path / "predictions" / "test.json"
    back = predictions.read(path)
    assert back.ids == split.ids
    assert back.at("last").correct == split.at("last").correct
    assert back.at("best").scores[0] == round(0.5 + 0.1234567, predictions.SCORE_DIGITS)
    assert back.at("best").accuracy == accuracy_percent(5, 7)
    assert predictions.artifact_path("valid") == "predictions/valid.json"


def test_inconsistent_predictions_are_refused():
    with pytest.raises(ValueError, match="2 predictions, 2 scores, 3 correct"):
        CheckpointPredictions(1, (0, 1), (0.5, 0.5), (1, 0, 1))
    with pytest.raises(ValueError, match="0 or 1"):
        CheckpointPredictions(1, (0,), (0.5,), (2,))
    three = _split([0, 1, 2], [1, 1, 1]).at()
    with pytest.raises(ValueError, match="best: 3 predictions for 2 examples"):
        SplitPredictions("test", "classification", (0, 1), {"best": three})
    with pytest.raises(KeyError, match="no 'last'"):
        _split([0], [1]).at("last")


def test_a_newer_format_is_refused():
    text = _split([0], [1]).to_json().replace('"format":1', '"format":99')
    with pytest.raises(ValueError, match="format 99"):
        SplitPredictions.from_json(text)


def test_pairing_follows_example_ids_not_positions():
    a = _split([0, 1, 2, 3], [1, 0, 1, 0])
    b = _split([3, 2, 1, 0, 9], [1, 1, 0, 0, 1])  # example 3 first; 9 only in b
    left, right = predictions.paired(a, b)
    assert list(left) == [1, 0, 1, 0]
    assert list(right) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="share no example"):
        predictions.paired(_split([0], [1]), _split([5], [1]))
