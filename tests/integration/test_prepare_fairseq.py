"""Prepared data read back by real fairseq: same ids as the HF jsonl, right labels,
and `fairseq-train` accepts it for sentence_prediction and masked_lm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.data import PreparedData, prepare
from sweeper.data.generate import ensure_generated
from sweeper.spec.load import load_spec

pytestmark = pytest.mark.integration
pytest.importorskip("fairseq")

DEMO = Path(__file__).resolve().parents[2] / "sweeps" / "demo.yaml"
SPLITS = ("train", "valid", "test")


def small_demo(tmp_path: Path, *overrides: str):
    """The demo spec with small sizes and every output under tmp_path."""
    corpus = tmp_path / "corpus"
    return load_spec(
        DEMO,
        [
            f"output_dir={tmp_path / 'out'}",
            f"data.dir={corpus}",
            f"model.sentencepiece={corpus / 'sentencepiece.bpe.model'}",
            f"model.dictionary={corpus / 'dict.txt'}",
            "data.generate.train_size=160",
            "data.generate.valid_size=40",
            "data.generate.test_size=40",
            "data.generate.unlabeled_size=800",
            "data.generate.vocab_size=300",
            *overrides,
        ],
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[object, PreparedData]:
    spec = small_demo(tmp_path_factory.mktemp("demo"))
    return spec, prepare(spec, log=lambda _: None)


@pytest.fixture(scope="module")
def reversed_labels(tmp_path_factory) -> tuple[object, PreparedData]:
    """The generated corpus read as `source: files` with data.labels = ["1", "0"]:
    a raw "1" must then be class 0 in both frameworks."""
    tmp_path = tmp_path_factory.mktemp("reversed")
    generated = small_demo(tmp_path)
    ensure_generated(generated, log=lambda _: None)
    spec = small_demo(
        tmp_path,
        "data.source=files",
        "data.generate=null",
        'data.labels=["1", "0"]',
        "model.pretrain=null",
        "grid.init=[random]",
    )
    return spec, prepare(spec, log=lambda _: None)


def hf_rows(data: PreparedData, split: str) -> list[dict]:
    return [json.loads(line) for line in data.hf_file(split).read_text().splitlines()]


def raw_labels(spec, split: str) -> list[str]:
    return (spec.data.dir / f"{split}.label").read_text(encoding="utf-8").split()


@pytest.mark.parametrize("split", SPLITS)
def test_binarized_ids_equal_hf_ids(demo, split) -> None:
    from fairseq.data import Dictionary, data_utils

    spec, data = demo
    dictionary = Dictionary.load(str(data.fairseq_dir / "input0" / "dict.txt"))
    labels = Dictionary.load(str(data.fairseq_dir / "label" / "dict.txt"))
    inputs = data_utils.load_indexed_dataset(str(data.fairseq_dir / "input0" / split), dictionary)
    targets = data_utils.load_indexed_dataset(str(data.fairseq_dir / "label" / split), labels)
    rows = hf_rows(data, split)
    assert len(inputs) == len(targets) == len(rows) == data.num_sentences(split)
    for i, row in enumerate(rows):
        assert [0, *inputs[i].tolist()] == row["input_ids"], i
        label_id, eos = targets[i].tolist()
        assert eos == labels.eos()
        assert label_id - labels.nspecial == row["label"], i
        assert labels[label_id] == spec.data.labels[row["label"]]


def test_ids_decode_back_to_the_reviews(demo) -> None:
    """One encoding: ids -> dict symbols -> sentencepiece decode gives the raw text."""
    import sentencepiece as spm
    from fairseq.data import Dictionary

    spec, data = demo
    dictionary = Dictionary.load(str(data.dictionary))
    processor = spm.SentencePieceProcessor(model_file=str(spec.model.sentencepiece))
    reviews = (spec.data.dir / "test.review").read_text(encoding="utf-8").splitlines()
    for review, row in zip(reviews, hf_rows(data, "test"), strict=True):
        pieces = [dictionary[i] for i in row["input_ids"][1:-1]]
        assert processor.decode_pieces(pieces) == review


def load_task_split(data: PreparedData, split: str):
    """The dataset fairseq's sentence_prediction task builds from our folder."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [str(data.fairseq_dir), "--task", "sentence_prediction", "--arch", "roberta_base",
         "--criterion", "sentence_prediction",
         "--num-classes", str(data.num_classes), "--init-token", "0",
         "--separator-token", "2", "--max-positions", str(data.max_positions)],
    )  # fmt: skip
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    assert len(task.source_dictionary) == data.vocab_size
    task.load_dataset(split)
    return task.dataset(split)


@pytest.mark.parametrize("split", SPLITS)
def test_fairseq_task_feeds_the_hf_sequence_and_class_is_label_position(
    reversed_labels, split
) -> None:
    spec, data = reversed_labels
    assert data.labels == ("1", "0")
    dataset = load_task_split(data, split)
    rows, raw = hf_rows(data, split), raw_labels(spec, split)
    assert len(dataset) == len(rows) == len(raw)
    for i, (row, label) in enumerate(zip(rows, raw, strict=True)):
        item = dataset[i]
        assert item["net_input.src_tokens"].tolist() == row["input_ids"], i
        expected = ["1", "0"].index(label)  # raw "1" is class 0 here
        assert item["target"].tolist() == [expected] == [row["label"]], i


def fairseq_train(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    common = ["--arch", "roberta_base", "--encoder-layers", "1", "--encoder-embed-dim", "16",
              "--encoder-ffn-embed-dim", "16", "--encoder-attention-heads", "2",
              "--max-positions", "64", "--optimizer", "adam", "--lr", "1e-4",
              "--max-update", "2", "--cpu", "--no-save", "--num-workers", "0",
              "--no-progress-bar", "--log-format", "simple", "--log-interval", "1",
              "--save-dir", str(tmp_path / "ckpt")]  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "fairseq_cli.train", *args, *common],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_fairseq_train_sentence_prediction_accepts_the_data(demo, tmp_path) -> None:
    _, data = demo
    result = fairseq_train(
        [str(data.fairseq_dir), "--task", "sentence_prediction", "--criterion",
         "sentence_prediction", "--num-classes", "2", "--init-token", "0",
         "--separator-token", "2", "--batch-size", "8", "--valid-subset", "valid,test",
         "--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric"],
        tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert "num_updates 2" in log
    assert "valid on 'test' subset" in log


def test_fairseq_train_masked_lm_accepts_the_pretrain_data(demo, tmp_path) -> None:
    _, data = demo
    assert data.pretrain_dir is not None
    result = fairseq_train(
        [str(data.pretrain_dir), "--task", "masked_lm", "--criterion", "masked_lm",
         "--tokens-per-sample", "64", "--sample-break-mode", "complete", "--batch-size", "8"],
        tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "num_updates 2" in result.stdout + result.stderr


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> tuple[object, PreparedData]:
    """The demo's pair task (`data.text2_suffix`), with max_positions 24 so that some
    pairs (up to ~40 tokens) must be truncated."""
    spec = small_demo(
        tmp_path_factory.mktemp("pairs"), "data.text2_suffix=review2", "model.arch.max_positions=24"
    )
    return spec, prepare(spec, log=lambda _: None)


@pytest.mark.parametrize("split", SPLITS)
def test_pair_ids_are_identical_in_both_frameworks(pairs, split) -> None:
    """fairseq's sentence_prediction task (input0 + input1, init and separator tokens)
    builds, for every pair, exactly the sequence the HF jsonl holds."""
    spec, data = pairs
    assert (data.fairseq_dir / "input1" / f"{split}.bin").is_file()
    dataset = load_task_split(data, split)
    rows = hf_rows(data, split)
    assert len(dataset) == len(rows) == data.num_sentences(split)
    for i, row in enumerate(rows):
        assert dataset[i]["net_input.src_tokens"].tolist() == row["input_ids"], i
        assert dataset[i]["target"].tolist() == [row["label"]], i
        assert len(row["input_ids"]) <= spec.model.arch.max_positions
    assert data.stats["splits"][split]["truncated"] > 0  # the budget rule was exercised


def test_pair_ids_are_what_a_roberta_tokenizer_makes_of_the_text_pair(pairs, tmp_path) -> None:
    """HF's RoBERTa pair template `<s> A </s></s> B </s>` over the same vocabulary, with
    its `longest_first` truncation to max_positions, gives the jsonl's ids for every pair."""
    from transformers import AutoTokenizer

    from tests.support.hf_models import save_tokenizer

    spec, data = pairs
    save_tokenizer(spec.model.sentencepiece, spec.model.dictionary, tmp_path / "tok")
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "tok"), local_files_only=True)
    firsts = (spec.data.dir / "test.review").read_text(encoding="utf-8").splitlines()
    seconds = (spec.data.dir / "test.review2").read_text(encoding="utf-8").splitlines()
    limit = spec.model.arch.max_positions
    for first, second, row in zip(firsts, seconds, hf_rows(data, "test"), strict=True):
        encoded = tokenizer(first, second, truncation="longest_first", max_length=limit)
        assert encoded["input_ids"] == row["input_ids"], (first, second)
