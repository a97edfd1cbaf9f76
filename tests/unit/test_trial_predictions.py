"""Per-example predictions as the one primitive: metrics counted from them, the files a
finished trial writes (best and last, valid and test), a causal LM's answers as text
and probability (real transformers, a tiny random decoder), and the comparison
`--evaluate` makes."""

from __future__ import annotations

import math

import pytest

from sweeper.trainers import predictions
from sweeper.trainers.metrics import ClassCounts, accuracy_percent, classification_metrics
from sweeper.trainers.predictions import CheckpointPredictions, Measured, differing
from sweeper.trainers.reload import classified
from sweeper.trainers.trial_predictions import SPLITS, write_trial_predictions


def test_a_classifiers_metrics_are_counted_from_its_predictions():
    predicted, labels = [0, 1, 1, 2, 0, 1], [0, 1, 0, 2, 2, 1]
    found = classified(30, predicted, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], labels, num_classes=3)
    assert found.predictions.correct == (1, 1, 0, 1, 0, 1)
    assert found.predictions.step == 30 and found.predictions.predicted == tuple(predicted)
    counts = ClassCounts.of(predicted, labels, 3)
    assert found.metrics == {"accuracy": accuracy_percent(4, 6), **classification_metrics(counts)}
    assert found.predictions.accuracy == found.metrics["accuracy"]  # one count, one float
    assert found.logged("test")["test_macro_f1"] == counts.macro_f1()
    with pytest.raises(ValueError, match="0 examples"):
        classified(1, [], [], [], 2)


def test_differing_names_positions_whose_class_or_flag_changed():
    stored = CheckpointPredictions(5, (1, 0, 1, "a"), (0.5,) * 4, (1, 0, 1, 1))
    again = CheckpointPredictions(5, (1, 1, 1, "a"), (0.7,) * 4, (1, 1, 0, 1))
    assert differing(stored, again) == [1, 2]  # scores are not compared
    assert differing(stored, stored) == []
    with pytest.raises(ValueError, match="4 stored predictions, 1 made again"):
        differing(stored, CheckpointPredictions(5, (1,), (0.5,), (1,)))


def _measured(step: int, flags: tuple[int, ...]) -> Measured:
    found = CheckpointPredictions(step, flags, tuple(0.5 for _ in flags), flags)
    return Measured(found, {"accuracy": found.accuracy})


def test_a_finished_trial_writes_best_and_last_of_each_split(tmp_path):
    calls: list[tuple[str, int]] = []

    def predict(where, step, splits):
        calls.append((where, step))
        return {
            split: _measured(step, (1, 0, 1) if split == "test" else (1, 1)) for split in splits
        }

    lines: list[str] = []
    checkpoints = {"best": ("b", 20), "last": ("l", 30)}
    written = write_trial_predictions(
        tmp_path, "classification", checkpoints, predict, lines.append
    )
    assert [p.name for p in written] == ["valid.json", "test.json"] and SPLITS == ("valid", "test")
    assert calls == [("b", 20), ("l", 30)]
    test = predictions.read(tmp_path / "predictions" / "test.json")
    assert test.ids == (0, 1, 2) and test.task == "classification"
    assert (test.at("best").step, test.at("last").step) == (20, 30)
    assert predictions.read(tmp_path / "predictions" / "valid.json").at("best").correct == (1, 1)
    assert lines and lines[0].startswith("predictions: valid and test at best (step 20), last")


def test_a_best_that_is_the_last_is_predicted_once(tmp_path):
    calls: list[int] = []

    def predict(where, step, splits):
        calls.append(step)
        return {split: _measured(step, (1, 0)) for split in splits}

    checkpoints = {"best": ("same", 40), "last": ("same", 40)}
    write_trial_predictions(tmp_path, "causal_lm", checkpoints, predict, lambda _: None)
    assert calls == [40]
    found = predictions.read(tmp_path / "predictions" / "valid.json")
    assert found.at("best") == found.at("last")
    assert write_trial_predictions(tmp_path / "none", "x", {}, predict, lambda _: None) == []


def test_an_answer_reads_as_its_pieces_and_without_symbols_as_its_ids():
    from sweeper.trainers.hf.lm_data import answer_text

    symbols = [
        "<s>",
        "<pad>",
        "</s>",
        "<unk>",
        "\u2581une",
        "\u2581perte",
        "\u2581de",
        "\u2581temps",
    ]
    assert answer_text([4, 5, 6, 7], symbols) == "une perte de temps"
    assert answer_text([4, 99], symbols) == "une<99>"
    assert answer_text([4, 5], None) == "4 5"


def _decoder(eos_bias: float = 0.0):
    """A tiny random Llama; `eos_bias` added to every `</s>` logit."""
    import torch
    from transformers import LlamaForCausalLM

    from sweeper.models.llama import EOS_ID, llama_config

    class Decoder(LlamaForCausalLM):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits[..., EOS_ID] += eos_bias
            return out

    torch.manual_seed(0)
    arch = {"layers": 1, "embed_dim": 16, "ffn_dim": 32, "heads": 2, "max_positions": 32}
    return Decoder(llama_config(arch, 40)).eval()


def _probability(model, prompt: list[int], tokens: list[int]) -> float:
    """The product of `tokens`' probabilities, fed one at a time after `<s> prompt`."""
    import torch

    from sweeper.models.llama import BOS_ID

    sequence, probability = [BOS_ID, *prompt], 1.0
    with torch.no_grad():
        for token in tokens:
            log_probs = model(torch.tensor([sequence])).logits[0, -1].float().log_softmax(-1)
            probability *= math.exp(float(log_probs[token]))
            sequence.append(token)
    return probability


ROWS = [{"prompt": [5 + i % 7, 6, 7 + i % 3], "answer": [8 + i % 2, 9]} for i in range(5)]


def test_a_causal_lms_answer_probability_is_the_product_of_its_tokens():
    from sweeper.trainers.hf.lm_data import AnswerDataset, predict

    model = _decoder()
    answers = predict(model, AnswerDataset(ROWS))
    first = list(answers.answers[0])
    assert len(first) == 3  # no </s> within the limit (longest answer + 1): 3 tokens
    assert answers.scores[0] == pytest.approx(
        _probability(model, ROWS[0]["prompt"], first), rel=1e-5
    )


def test_a_causal_lms_exact_match_counts_its_answers_and_their_closing_token():
    from sweeper.models.llama import EOS_ID
    from sweeper.trainers.hf.lm_data import AnswerDataset, measure, predict

    model = _decoder(eos_bias=50.0)  # every answer ends at once: the empty answer
    rows = [{**row, "answer": []} if i < 2 else row for i, row in enumerate(ROWS)]
    answers = predict(model, AnswerDataset(rows))
    assert answers.answers == ((),) * 5 and answers.correct == (1, 1, 0, 0, 0)
    assert measure(model, AnswerDataset(rows))["exact_match"] == accuracy_percent(2, 5)
    closing = _probability(model, rows[0]["prompt"], [EOS_ID])  # </s> is its one token
    assert answers.scores[0] == pytest.approx(closing, rel=1e-6) and closing > 0.99
