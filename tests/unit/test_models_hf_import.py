"""An HF model folder as `model.checkpoint`: the reverse conversion and its checks.

Parity: masked-LM logits of the HF model and of fairseq's model holding the converted
weights agree within 1e-4, at the demo's size and the lab's (4 x 512, vocabulary 32,000).
Every folder here is saved by the test (`save_pretrained`), nothing downloaded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from sweeper.data.vocab import (
    dict_entries_from_sentencepiece,
    fairseq_ids,
    load_sentencepiece,
    model_vocab_size,
    train_sentencepiece,
    write_dict,
)
from sweeper.models.arch import build_fairseq_model
from sweeper.models.convert import hf_to_fairseq
from sweeper.models.hf_import import folder_problems, import_checkpoint, inspect, read_weights
from tests.support.hf_models import (
    DEMO_ARCH,
    LAB_ARCH,
    perturbed_fairseq_state,
    save_hf_folder,
)

WORDS = [
    "le",
    "la",
    "un",
    "une",
    "livre",
    "roman",
    "histoire",
    "très",
    "bien",
    "mal",
    "lire",
    "auteur",
    "page",
    "style",
    "fin",
]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> tuple[Path, Path, int]:
    """(sentencepiece model, dict.txt, model vocabulary size) of a small corpus."""
    root = tmp_path_factory.mktemp("vocab")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(300)]
    sp = root / "sentencepiece.bpe.model"
    sp.write_bytes(train_sentencepiece(lines, 60))
    dictionary = root / "dict.txt"
    write_dict(dictionary, dict_entries_from_sentencepiece(load_sentencepiece(sp), lines))
    return sp, dictionary, len(fairseq_ids(dictionary))


def _tokens(vocab_size: int, batch: int = 3, length: int = 12) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(4, vocab_size, (batch, length), generator=gen)
    tokens[:, 0], tokens[:, -1] = 0, 2
    tokens[0, -4:] = 1  # a padded row
    return tokens


def _parity(tmp_path: Path, arch, vocab_size: int, sp: Path, dictionary: Path, **kind) -> float:
    state = perturbed_fairseq_state(arch, vocab_size)
    hf = save_hf_folder(tmp_path / "hf", state, arch, vocab_size, sp, dictionary, **kind)
    converted = import_checkpoint(tmp_path / "hf", tmp_path / "cache")
    fairseq = build_fairseq_model(arch, vocab_size).eval()
    fairseq.load_state_dict(torch.load(converted, weights_only=True)["model"], strict=True)
    tokens = _tokens(vocab_size)
    with torch.no_grad():
        theirs = hf(input_ids=tokens, attention_mask=(tokens != 1).long()).logits
        ours = fairseq(tokens)[0]
    keep = tokens != 1  # padded positions are masked out of attention in both, not compared
    return float((theirs - ours)[keep].abs().max())


@pytest.mark.parametrize("model_type", ["roberta", "camembert"])
def test_masked_lm_logits_match_at_the_demo_size(tmp_path, vocab, model_type):
    sp, dictionary, size = vocab
    arch = DEMO_ARCH.model_copy(update={"max_positions": 32})
    assert _parity(tmp_path, arch, size, sp, dictionary, model_type=model_type) < 1e-4


def test_masked_lm_logits_match_at_the_lab_size(tmp_path, vocab):
    sp, dictionary, _ = vocab
    size = LAB_ARCH.vocab_size
    assert size == 32000
    assert _parity(tmp_path, LAB_ARCH, size, sp, dictionary) < 1e-4


def test_a_bare_model_converts_without_an_lm_head(tmp_path, vocab):
    sp, dictionary, size = vocab
    state = perturbed_fairseq_state(DEMO_ARCH, size)
    save_hf_folder(tmp_path / "hf", state, DEMO_ARCH, size, sp, dictionary, kind="base")
    converted = hf_to_fairseq(read_weights(inspect(tmp_path / "hf")))
    assert not any(k.startswith("encoder.lm_head.") for k in converted)
    encoder = {k: v for k, v in state.items() if k.startswith("encoder.sentence_encoder.layers")}
    assert all(torch.equal(converted[k], v) for k, v in encoder.items())


def test_conversion_is_cached_by_content(tmp_path, vocab):
    sp, dictionary, size = vocab
    state = perturbed_fairseq_state(DEMO_ARCH, size)
    save_hf_folder(tmp_path / "hf", state, DEMO_ARCH, size, sp, dictionary)
    first = import_checkpoint(tmp_path / "hf", tmp_path / "cache")
    stamp = first.stat().st_mtime_ns
    assert import_checkpoint(tmp_path / "hf", tmp_path / "cache") == first
    assert first.stat().st_mtime_ns == stamp  # not converted again
    save_hf_folder(
        tmp_path / "hf",
        perturbed_fairseq_state(DEMO_ARCH, size, seed=1),
        DEMO_ARCH,
        size,
        sp,
        dictionary,
    )
    assert import_checkpoint(tmp_path / "hf", tmp_path / "cache") != first


def _folder(tmp_path: Path, vocab) -> Path:
    sp, dictionary, size = vocab
    save_hf_folder(
        tmp_path / "hf", perturbed_fairseq_state(DEMO_ARCH, size), DEMO_ARCH, size, sp, dictionary
    )
    return tmp_path / "hf"


def _problems(folder: Path, vocab, arch=DEMO_ARCH) -> list[str]:
    _, dictionary, size = vocab
    return folder_problems(folder, arch, size, dictionary, fairseq_ids(dictionary))


def test_a_good_folder_has_no_problems(tmp_path, vocab):
    assert _problems(_folder(tmp_path, vocab), vocab) == []


def test_a_left_to_right_lm_is_a_pretrained_encoder_too(tmp_path, vocab):
    """A `*ForCausalLM` (what sweeper's causal pretraining saves) has the masked LM's
    tensors under the same names: accepted, converted to the same fairseq state."""
    folder = _folder(tmp_path, vocab)
    masked = hf_to_fairseq(read_weights(inspect(folder)))
    config = json.loads((folder / "config.json").read_text())
    causal = {**config, "architectures": ["RobertaForCausalLM"], "is_decoder": True}
    (folder / "config.json").write_text(json.dumps(causal))
    assert _problems(folder, vocab) == []
    converted = torch.load(import_checkpoint(folder, tmp_path / "cache"), weights_only=True)
    assert converted["sweeper_source"]["architecture"] == "RobertaForCausalLM"
    assert converted["model"].keys() == masked.keys()
    assert all(torch.equal(converted["model"][k], v) for k, v in masked.items())


@pytest.mark.parametrize(
    ("remove", "words"),
    [
        ("config.json", "no config.json"),
        ("model.safetensors", "no weights file"),
        ("tokenizer.json", "no tokenizer"),
    ],
)
def test_a_missing_piece_is_named(tmp_path, vocab, remove, words):
    folder = _folder(tmp_path, vocab)
    (folder / remove).unlink()
    assert any(words in p for p in _problems(folder, vocab))


def test_every_missing_piece_is_named_at_once(tmp_path, vocab):
    empty = tmp_path / "empty"
    empty.mkdir()
    problems = _problems(empty, vocab)
    assert len(problems) == 3 and "config.json" in problems[0]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"model_type": "bert"}, "unsupported model_type 'bert'"),
        ({"architectures": ["RobertaForSequenceClassification"]}, "unsupported architecture"),
        ({"num_hidden_layers": 3}, "num_hidden_layers is 3, the spec's model.arch needs 2"),
        ({"vocab_size": 77}, "vocab_size is 77"),
    ],
)
def test_an_unsupported_or_mismatched_config_is_named(tmp_path, vocab, change, words):
    folder = _folder(tmp_path, vocab)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    assert any(words in p for p in _problems(folder, vocab))


def test_another_vocabulary_is_refused(tmp_path, vocab):
    folder = _folder(tmp_path, vocab)
    _, dictionary, _ = vocab
    entries = dictionary.read_text(encoding="utf-8").splitlines()
    swapped = tmp_path / "dict.txt"
    swapped.write_text("\n".join([entries[1], entries[0], *entries[2:]]) + "\n", encoding="utf-8")
    _, _, size = vocab
    (problem,) = folder_problems(folder, DEMO_ARCH, size, swapped, fairseq_ids(swapped))
    assert "gives 2 of" in problem and "another vocabulary" in problem


def test_model_vocab_size_counts_what_fairseq_ids_number(vocab):
    _, dictionary, size = vocab
    entries = len(dictionary.read_text(encoding="utf-8").splitlines())
    assert size == model_vocab_size(entries)
