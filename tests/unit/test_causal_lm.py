"""`task: causal_lm`: the spec's rules, the LoRA shorthands, answer-only labels and the
parameter counts of the two target-module choices (real transformers + PEFT, tiny)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.cli.main import main
from sweeper.models.llama import (
    ALL_LINEAR,
    ATTENTION,
    apply_lm_lora,
    llama_config,
    lm_folder_problems,
    target_modules,
)
from sweeper.selection import Selection
from sweeper.spec.load import SpecError, load_spec
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.hf.lm_data import IGNORE, AnswerDataset, collate
from sweeper.trial_keys import expand
from tests.support.specs import SWEEPS, minimal_spec

ARCH = {"layers": 1, "embed_dim": 16, "ffn_dim": 32, "heads": 2, "max_positions": 32}
LORA = {"r": 8, "alpha": 16, "dropout": 0.05, "bias": "none"}


def _lm_spec(**changes) -> dict:
    spec = minimal_spec()
    spec.update(task="causal_lm", grid={"framework": ["hf"], "method": ["full", "lora"]})
    spec.update(changes)
    return spec


def test_a_causal_lm_spec_selects_by_exact_match_unless_told(write_spec):
    spec = load_spec(write_spec(_lm_spec()))
    assert Selection.of(spec.select) == Selection(
        "valid_exact_match", "max", ("test_exact_match", "test_perplexity")
    )
    told = load_spec(write_spec(_lm_spec(select={"metric": "valid_perplexity"})))
    assert Selection.of(told.select).mode == "min"


def test_fairseq_cannot_run_a_causal_lm_sweep(write_spec, capsys):
    path = write_spec(_lm_spec(grid={"framework": ["fairseq", "hf"]}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "grid.framework.0: causal_lm has no fairseq backend (it runs on hf)" in err


def test_a_classification_metric_is_not_a_causal_lm_one(write_spec):
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(_lm_spec(select={"metric": "valid_accuracy"})))
    assert "valid_loss, valid_perplexity, valid_exact_match" in str(exc.value)


def test_target_module_shorthands_expand_to_the_reports_lists():
    assert target_modules(["attention"]) == list(ATTENTION)
    assert target_modules(["all-linear"]) == list(ALL_LINEAR)
    assert {"embed_tokens", "lm_head", "gate_proj"} <= set(ALL_LINEAR)
    assert target_modules(["q_proj", "attention"]) == list(ATTENTION)  # no repeats
    assert target_modules(["query_key_value"]) == ["query_key_value"]  # a name passes through


def test_all_linear_trains_more_than_attention_only():
    from transformers import LlamaForCausalLM

    counts = {}
    for name in ("attention", "all-linear"):
        model = apply_lm_lora(
            LlamaForCausalLM(llama_config(ARCH, 100)), {**LORA, "target_modules": [name]}
        )
        counts[name] = model.get_nb_trainable_parameters()[0]
    # r=8 on q,k,v,o of 16x16: 4 x 8 x (16 + 16); all-linear adds the MLP, embeddings, head
    assert counts["attention"] == 4 * 8 * 32
    assert counts["all-linear"] > counts["attention"]


def test_the_loss_is_on_the_answer_tokens_only():
    data = AnswerDataset(
        [{"prompt": [10, 11, 12], "answer": [20, 21]}, {"prompt": [10], "answer": [20]}]
    )
    first = data[0]
    assert first["input_ids"] == [0, 10, 11, 12, 20, 21, 2]
    assert first["labels"] == [IGNORE] * 4 + [20, 21, 2]
    batch = collate([data[0], data[1]])
    assert batch["input_ids"][1].tolist() == [0, 10, 20, 2, 1, 1, 1]
    assert batch["labels"][1].tolist() == [IGNORE, IGNORE, 20, 2] + [IGNORE] * 3
    assert batch["attention_mask"][1].tolist() == [1, 1, 1, 1, 0, 0, 0]


def test_a_local_folder_must_be_a_causal_lm_with_the_sweeps_ids(tmp_path: Path):
    assert "no config.json" in lm_folder_problems(tmp_path, 50)[0]
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["RobertaModel"], "vocab_size": 40})
    )
    problems = " ".join(lm_folder_problems(tmp_path, 50))
    assert (
        "no weights" in problems and "*ForCausalLM" in problems and "40 embedding rows" in problems
    )


def test_the_demo_llm_sweep_is_the_issues_grid():
    spec = load_spec(SWEEPS / "demo-llm.yaml")
    trials, skipped = expand(spec)
    assert not skipped and spec.task == "causal_lm" and spec.model.pretrain is not None
    kinds = {(t.init, t.method, tuple((t.lora or {}).get("target_modules", ()))) for t in trials}
    assert len(trials) == len(spec.grid.seed) * 6 and len(spec.grid.seed) >= 2
    for init in ("pretrained", "random"):
        assert {
            (init, "full", ()),
            (init, "lora", ("attention",)),
            (init, "lora", ("all-linear",)),
        } <= kinds
    assert spec.lora.r == 8


def test_lm_events_carry_their_metrics_as_json():
    event = MetricEvent(
        step=5, epoch=1.0, split="test", loss=0.1, metrics={"exact_match": 50.0, "perplexity": 1.1}
    )
    assert json.loads(event.to_json())["metrics"] == {"exact_match": 50.0, "perplexity": 1.1}


def test_params_counts_the_decoder_and_each_lora_choice(capsys):
    args = [
        "params",
        str(SWEEPS / "demo-llm.yaml"),
        "model.arch.vocab_size=1002",
        "--format",
        "json",
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "LlamaForCausalLM" and data["total"] == 210_496
    trainable = {tuple(row["lora"]["target_modules"]): row["trainable"] for row in data["lora"]}
    # attention: 2 layers x 4 projections x r=8 x (64 in + 64 out) = 8,192
    assert trainable == {("attention",): 8_192, ("all-linear",): 34_464}


def test_a_saved_decoder_folder_is_usable_and_loads(tmp_path: Path):
    from sweeper.models.llama import load_lm, random_init

    folder = random_init(ARCH, 50, 3, tmp_path)
    assert random_init(ARCH, 50, 3, tmp_path) == folder  # cached per (arch, vocab, seed)
    assert lm_folder_problems(folder, 50) == []
    assert lm_folder_problems(folder, 60) == [
        f"{folder}: 50 embedding rows, but model.dictionary numbers 60 ids"
    ]
    model = load_lm(folder)
    assert model.config.vocab_size == 50 and model.config.num_hidden_layers == 1
