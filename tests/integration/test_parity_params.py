"""Parameter counts of the lab's model, from the real fairseq and HF models.

The lab's reports disagree (22,807,552 / 22,675,456 / 22,829,056); these are the numbers
`sweeper params sweeps/roberta.yaml` must print, each traced to the convention behind it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fairseq")
pytest.importorskip("transformers")

from sweeper.cli.main import main
from sweeper.models.arch import fairseq_args, hf_config
from sweeper.models.lora import lora_trainable_params
from sweeper.spec.model_block import ArchConfig

pytestmark = pytest.mark.integration

ROBERTA_YAML = Path(__file__).resolve().parents[2] / "sweeps" / "roberta.yaml"
LAB = ArchConfig(layers=4, embed_dim=512, ffn_dim=512, heads=8, max_positions=256)


@pytest.fixture(scope="module")
def lab_report() -> dict:
    """`sweeper params sweeps/roberta.yaml --format json`, run once for the module."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["params", str(ROBERTA_YAML), "--format", "json"]) == 0
    return json.loads(out.getvalue())


def test_lab_totals_are_the_real_models(lab_report) -> None:
    totals = lab_report["totals"]
    assert totals["encoder"] == {"fairseq": 22_829_056, "hf": 22_829_568}
    conventions = {c["name"]: c["count"] for c in lab_report["conventions"]}
    assert conventions == {
        "weights only": 22_807_552,
        "all parameters": 22_829_056,
        "positions excluded": 22_675_456,
    }


def test_components_add_up_and_differ_only_by_token_types(lab_report) -> None:
    components = lab_report["components"]
    for framework in ("fairseq", "hf"):
        summed = sum(per[framework] or 0 for per in components.values())
        assert summed == lab_report["totals"]["encoder"][framework]
    assert components["token-type embeddings"] == {"fairseq": None, "hf": 512}
    assert components["position embeddings"]["fairseq"] == 258 * 512
    same = [name for name in components if name != "token-type embeddings"]
    assert all(components[n]["fairseq"] == components[n]["hf"] for n in same)
    # dense 512x512 + out_proj 512x2, with biases; the LM head without its tied weight.
    assert lab_report["totals"]["classification head"]["hf"] == 512 * 512 + 512 + 512 * 2 + 2
    assert lab_report["totals"]["LM head"]["fairseq"] == 512 * 512 + 512 + 2 * 512 + 32000


def test_heads_differ_by_what_they_choose_among(lab_report) -> None:
    heads = lab_report["heads"]
    classifier, lm_head = heads["classification head"], heads["LM head"]
    assert (classifier["outputs"], classifier["output layer"]) == (2, 2 * 513)
    assert classifier["parameters"] == lab_report["totals"]["classification head"]["fairseq"]
    assert (lm_head["outputs"], lm_head["output layer"]) == (32_000, 32_000 * 513)
    tied = 32_000 * 512  # the token embeddings
    assert lm_head["parameters"] == lab_report["totals"]["LM head"]["fairseq"] + tied


def test_table_prints_the_lab_numbers(capsys) -> None:
    assert main(["params", str(ROBERTA_YAML)]) == 0
    table = capsys.readouterr().out
    for number in ("22,829,056", "22,829,568", "22,807,552", "22,675,456"):
        assert number in table
    assert "weights only (000, 001)" in table and "positions excluded (003)" in table


def test_fairseq_parses_the_arch_flags_into_this_arch() -> None:
    args = fairseq_args(LAB, dropout=0.2, attention_dropout=0.05)
    assert (args.arch, args.encoder_layers, args.encoder_embed_dim) == ("roberta_base", 4, 512)
    assert (args.encoder_ffn_embed_dim, args.encoder_attention_heads) == (512, 8)
    assert (args.max_positions, args.activation_fn) == (256, "gelu")
    assert (args.dropout, args.attention_dropout, args.pooler_dropout) == (0.2, 0.05, 0.0)


def test_lora_trainable_count_is_adapters_plus_head() -> None:
    arch = ArchConfig(layers=2, embed_dim=64, ffn_dim=128, heads=4, max_positions=32)
    config = hf_config(arch, vocab_size=100, num_classes=2)
    lora = {"r": 4, "alpha": 8, "target_modules": ["query", "value"]}
    trainable, total = lora_trainable_params(config, lora)
    adapters = 2 * 2 * 4 * (64 + 64)  # layers x (query, value) x r x (in + out)
    head = 64 * 64 + 64 + 64 * 2 + 2
    assert trainable == adapters + head
    assert total > trainable
    wider, _ = lora_trainable_params(config, {**lora, "target_modules": ["query", "key", "value"]})
    assert wider == trainable + 2 * 4 * (64 + 64)
