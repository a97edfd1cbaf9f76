"""`prepare` on a small generated corpus: caching, statistics, truncation, vocab size.

Uses sentencepiece and fairseq's Dictionary/indexed-dataset builder (a few seconds for
the import), but no training.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.data import DataError, PreparedData, prepare
from sweeper.data.generate import ensure_generated
from sweeper.spec.load import load_spec

pytest.importorskip("fairseq")

DEMO = Path(__file__).resolve().parents[2] / "sweeps" / "demo.yaml"


def small_demo(tmp_path: Path, *overrides: str):
    """The demo spec with small sizes and every output under tmp_path."""
    corpus = tmp_path / "corpus"
    return load_spec(
        DEMO,
        [
            f"output_dir={tmp_path / 'out'}",
            f"data.dir={corpus}",
            f"model.sentencepiece={corpus / 'sp.model'}",
            f"model.dictionary={corpus / 'dict.txt'}",
            "data.generate.train_size=120",
            "data.generate.valid_size=40",
            "data.generate.test_size=30",
            "data.generate.unlabeled_size=600",
            "data.generate.vocab_size=200",
            *overrides,
        ],
    )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> tuple[object, PreparedData, list[str]]:
    tmp_path = tmp_path_factory.mktemp("prep")
    spec = small_demo(tmp_path)
    messages: list[str] = []
    return spec, prepare(spec, log=messages.append), messages


def test_layout_and_api(prepared) -> None:
    spec, data, _ = prepared
    assert data.root.parent == spec.output_dir / "prepared"
    assert data.fairseq_dir == data.root / "fairseq" and data.hf_dir == data.root / "hf"
    assert data.pretrain_dir == data.root / "fairseq" / "pretrain"
    for split in ("train", "valid", "test"):
        for sub in ("input0", "label"):
            assert (data.fairseq_dir / sub / f"{split}.bin").is_file()
            assert (data.fairseq_dir / sub / f"{split}.idx").is_file()
        assert data.hf_file(split).is_file()
    for split in ("train", "valid"):
        assert (data.pretrain_dir / f"{split}.bin").is_file()
    assert (data.pretrain_dir / "dict.txt").read_bytes() == spec.model.dictionary.read_bytes()
    assert data.dictionary.read_bytes() == spec.model.dictionary.read_bytes()
    assert (data.fairseq_dir / "label" / "dict.txt").read_text().split("\n")[0].startswith("0 ")
    assert (data.num_classes, data.num_train, data.labels) == (2, 120, ("0", "1"))
    assert PreparedData.load(data.root) == data
    assert PreparedData.load(data.root).stats == data.stats


def test_stats(prepared) -> None:
    spec, data, messages = prepared
    stats = json.loads((data.root / "stats.json").read_text())
    assert stats == data.stats
    dict_lines = spec.model.dictionary.read_text(encoding="utf-8").splitlines()
    assert stats["dict_entries"] == len(dict_lines)
    assert data.vocab_size == stats["vocab_size"] == 4 + len(dict_lines) + 1
    for split, size in (("train", 120), ("valid", 40), ("test", 30)):
        s = stats["splits"][split]
        assert s["sentences"] == size
        assert sum(s["class_counts"].values()) == size
        assert s["class_counts"]["1"] in range(size // 2 - 6, size // 2 + 7)  # 10% noise
        assert s["truncated"] == 0 and s["unk_rate"] == 0.0
        hf = [json.loads(line) for line in data.hf_file(split).read_text().splitlines()]
        assert s["tokens"] == sum(len(row["input_ids"]) - 2 for row in hf)
        assert s["max_length"] == max(len(row["input_ids"]) - 2 for row in hf)
    assert stats["pretrain"]["train"]["sentences"] + stats["pretrain"]["valid"]["sentences"] == 600
    assert any(m.startswith("prepared: ") for m in messages)
    assert any("vocabulary: " in m and "train " in m for m in messages)  # the printed table


def test_second_prepare_is_a_cache_hit(prepared) -> None:
    spec, data, _ = prepared
    before = {p: p.stat().st_mtime_ns for p in data.root.rglob("*")}
    corpus_before = {p: p.stat().st_mtime_ns for p in spec.data.dir.iterdir()}
    messages: list[str] = []
    again = prepare(spec, log=messages.append)
    assert again == data
    assert f"cached: {data.root}" in messages
    assert {p: p.stat().st_mtime_ns for p in data.root.rglob("*")} == before
    assert {p: p.stat().st_mtime_ns for p in spec.data.dir.iterdir()} == corpus_before
    assert len(list((spec.output_dir / "prepared").iterdir())) == 1


def test_generation_is_cached_by_settings(tmp_path) -> None:
    spec = small_demo(tmp_path)
    assert ensure_generated(spec, log=lambda _: None) is True
    model = spec.model.sentencepiece.read_bytes()
    assert ensure_generated(spec, log=lambda _: None) is False
    spec.model.dictionary.unlink()
    assert ensure_generated(spec, log=lambda _: None) is True  # a missing file is redone
    assert spec.model.sentencepiece.read_bytes() == model  # and byte-identical
    noisier = small_demo(tmp_path, "data.generate.label_noise=0.3")
    assert ensure_generated(noisier, log=lambda _: None) is True


def test_changed_input_gives_a_new_folder(prepared, tmp_path) -> None:
    _, data, _ = prepared
    other = prepare(small_demo(tmp_path, "data.generate.label_noise=0.3"), log=lambda _: None)
    assert other.root.name != data.root.name
    shorter = small_demo(tmp_path, "data.generate.label_noise=0.3", "model.arch.max_positions=8")
    cut = prepare(shorter, log=lambda _: None)
    assert cut.root.name != other.root.name
    train = cut.stats["splits"]["train"]
    assert train["truncated"] > 0 and train["max_length"] > 6
    rows = [json.loads(line) for line in cut.hf_file("train").read_text().splitlines()]
    assert max(len(row["input_ids"]) for row in rows) == 8
    assert all(row["input_ids"][0] == 0 and row["input_ids"][-1] == 2 for row in rows)


def test_force_rebuilds(prepared) -> None:
    spec, data, _ = prepared
    messages: list[str] = []
    again = prepare(spec, log=messages.append, force=True)
    assert again == data and not any(m.startswith("cached") for m in messages)


def test_vocab_size_must_match_the_dict(prepared) -> None:
    spec, data, _ = prepared
    wrong = spec.model_copy(
        update={
            "model": spec.model.model_copy(
                update={"arch": spec.model.arch.model_copy(update={"vocab_size": 32000})}
            )
        }
    )
    with pytest.raises(DataError) as info:
        prepare(wrong, log=lambda _: None)
    message = str(info.value)
    assert message.startswith(f"{spec.model.dictionary}: gives a vocabulary of {data.vocab_size}")
    assert "model.arch.vocab_size is 32000" in message


def test_unknown_pieces_are_counted(tmp_path) -> None:
    spec = small_demo(tmp_path, "model.pretrain=null", "grid.init=[random]")
    ensure_generated(spec, log=lambda _: None)
    review = spec.data.dir / "test.review"
    lines = review.read_text(encoding="utf-8").splitlines()
    lines[0] = "ß ß ß ß"  # a character the sentencepiece model never saw
    review.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = prepare(spec, log=lambda _: None)
    assert data.pretrain_dir is None and not (data.fairseq_dir / "pretrain").exists()
    test = data.stats["splits"]["test"]
    assert test["unk_rate"] > 0
    first = json.loads(data.hf_file("test").read_text().splitlines()[0])
    assert 3 in first["input_ids"]
