"""The pretraining stage on a tiny generated corpus: a real fairseq masked_lm run.

Its checkpoint must be a plain fairseq RoBERTa masked-LM checkpoint that the models
package accepts as the `pretrained` input of `init_checkpoint`; a second call must
reuse it without training; a different recipe must not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.trainers.fairseq.fairseq_checkpoints import allow_fairseq_checkpoints
from sweeper.trainers.fairseq.fairseq_pretrain import cache_key, pretrain
from tests.support.specs import tiny_pretrain_spec

pytestmark = pytest.mark.integration
pytest.importorskip("fairseq")

STEPS = 20


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """(spec, prepared data, checkpoint path, progress lines) of one real pretraining."""
    from sweeper.data import prepare

    spec = tiny_pretrain_spec(tmp_path_factory.mktemp("pretrain"), STEPS)
    prepared = prepare(spec, log=lambda _: None)
    messages: list[str] = []
    path = pretrain(spec, prepared, log=messages.append)
    return spec, prepared, path, messages


def load_state(path: Path) -> dict:
    import torch

    allow_fairseq_checkpoints()
    return torch.load(path, map_location="cpu")


def test_result_is_a_fairseq_masked_lm_checkpoint(pretrained) -> None:
    spec, prepared, path, _ = pretrained
    assert path.name == "model.pt" and path.parent.parent == spec.output_dir / "pretrained"
    assert [p.name for p in path.parent.parent.iterdir()] == [path.parent.name]  # no temp left
    checkpoint = load_state(path)
    state = checkpoint["model"]
    assert state["encoder.sentence_encoder.embed_tokens.weight"].shape == (prepared.vocab_size, 16)
    assert state["encoder.sentence_encoder.embed_positions.weight"].shape == (64 + 2, 16)
    assert "encoder.lm_head.dense.weight" in state and "encoder.lm_head.bias" in state
    assert not any(key.startswith("classification_heads.") for key in state)
    assert checkpoint["optimizer_history"][-1]["num_updates"] == STEPS
    assert checkpoint["cfg"]["task"]["_name"] == "masked_lm"
    assert "last_optimizer_state" not in checkpoint  # never resumed: no Adam moments kept


def test_progress_is_reported(pretrained) -> None:
    *_, messages = pretrained
    steps = [m for m in messages if "pretrain step" in m]
    assert steps and f"step {STEPS}/{STEPS}" in steps[-1]
    assert "valid loss" in steps[-1]  # the one validation, at the end
    assert messages[-1].startswith("pretrained checkpoint:")


def test_second_call_reuses_the_checkpoint(pretrained) -> None:
    spec, prepared, path, _ = pretrained
    written = path.stat().st_mtime_ns
    messages: list[str] = []
    assert pretrain(spec, prepared, log=messages.append) == path
    assert messages == [f"pretrained checkpoint (cached): {path}"]
    assert path.stat().st_mtime_ns == written


def test_key_follows_recipe_architecture_and_corpus(pretrained, tmp_path: Path) -> None:
    spec, prepared, _, _ = pretrained
    data, arch, config = Path(prepared.pretrain_dir), spec.model.arch, spec.model.pretrain
    key = cache_key(data, arch, config)
    assert cache_key(data, arch, config.model_copy(update={"seed": 1})) != key
    assert cache_key(data, arch.model_copy(update={"layers": 2}), config) != key
    copy = tmp_path / "corpus"
    copy.mkdir()
    for item in data.iterdir():
        (copy / item.name).write_bytes(item.read_bytes())
    assert cache_key(copy, arch, config) == key  # the same bytes elsewhere: same key
    (copy / "dict.txt").write_text((copy / "dict.txt").read_text() + "extra 1\n")
    assert cache_key(copy, arch, config) != key


def test_models_package_starts_trials_from_it(pretrained, tmp_path: Path) -> None:
    import torch

    from sweeper.models.init import init_checkpoint, read_init_checkpoint

    spec, prepared, path, _ = pretrained
    arch = spec.model.arch.model_copy(update={"vocab_size": prepared.vocab_size})
    init = init_checkpoint(arch, prepared.vocab_size, 2, "pretrained", 1, path, tmp_path)
    _, state = read_init_checkpoint(init)
    trained = load_state(path)["model"]
    for key in (
        "encoder.sentence_encoder.embed_tokens.weight",
        "encoder.sentence_encoder.layers.0.fc1.weight",
        "encoder.lm_head.dense.weight",
    ):
        assert torch.equal(state[key], trained[key]), key


def test_pretraining_needs_the_unlabeled_data(pretrained) -> None:
    from types import SimpleNamespace

    spec, *_ = pretrained
    with pytest.raises(ValueError, match="unlabeled"):
        pretrain(spec, SimpleNamespace(pretrain_dir=None))
    too_long = spec.model.pretrain.model_copy(update={"max_tokens_per_sample": 128})
    spec_long = spec.model_copy(
        update={"model": spec.model.model_copy(update={"pretrain": too_long})}
    )
    with pytest.raises(ValueError, match="max_positions"):
        pretrain(spec_long, SimpleNamespace(pretrain_dir=Path("/nowhere")))
