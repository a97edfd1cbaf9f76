"""`data:`: where the labeled splits and the unlabeled corpus are, in which format, with
which labels (and the generated demo corpus)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from sweeper.spec.strict import SpecPath, Strict


class GenerateConfig(Strict):
    """The deterministic demo corpus (see `sweeper.data.demo_corpus`)."""

    seed: int = 0
    """Seed of the generator: the same seed always writes the same files."""
    train_size: int = Field(1800, ge=10)
    """Labeled training reviews (the lab has 1,800)."""
    valid_size: int = Field(200, ge=10)
    """Labeled validation reviews: the split that picks each trial's best checkpoint."""
    test_size: int = Field(200, ge=10)
    """Labeled test reviews: the split whose metrics the summary reports."""
    unlabeled_size: int = Field(20000, ge=100)
    """Unlabeled sentences for the pretraining stage."""
    label_noise: float = Field(0.0, ge=0.0, lt=0.5)
    """Fraction of labels flipped in every split, to bring accuracies off 100%."""
    vocab_size: int = Field(1000, ge=50)
    """Sentencepiece vocabulary trained on the generated text."""


DataFormat = Literal["lines", "jsonl", "csv", "tsv", "parquet", "hf_disk"]
SplitName = Literal["train", "valid", "test"]


class DataConfig(Strict):
    source: Literal["files", "generated"] = "files"
    """`files`: user-supplied raw splits under `dir`; `generated`: the demo corpus is
    written into `dir` first."""
    dir: SpecPath
    """Folder holding the labeled splits (see `format`) and the unlabeled corpus
    (`unlabeled`); every data path of this block is relative to it."""
    format: DataFormat = "lines"
    """How the labeled splits are stored. `lines`: `{split}.{text_suffix}` and
    `{split}.{label_suffix}` per split, one example per line, aligned. `jsonl` (one JSON
    object per line), `csv`, `tsv` (tab-separated, quoted like CSV, header row; a quoted
    cell may span lines), `parquet`, `hf_disk` (a folder written by `datasets`'
    `save_to_disk`: a Dataset, or a DatasetDict whose keys are the `splits` values):
    tables whose columns `text_field`, `text2_field`, `label_field` hold each example,
    read from `files` (one per split) or `file` (one for all, with `split_field`). Every
    text of every format is normalised by one rule: each run of whitespace (spaces, tabs,
    newlines, U+2028 and every other Unicode space) becomes one space and the ends are
    stripped, so a multi-line text is one line of tokens for both frameworks."""
    files: dict[SplitName, str] | None = None
    """Table formats: one file per split (train, valid, test), relative to `dir`, e.g.
    `{train: train.jsonl, valid: valid.jsonl, test: test.jsonl}`."""
    file: str | None = None
    """Table formats: one file (or `hf_disk` folder) holding every split, relative to
    `dir`; the column `split_field` names each row's split by its `splits` value (an
    `hf_disk` DatasetDict names the splits by its keys instead)."""
    split_field: str = "split"
    """With `file`: the column whose value is the row's split (a value of `splits`,
    train/valid/test by default); another value is an error naming the row."""
    text_field: str = "text"
    """Table formats: the column holding each example's text (and, for the unlabeled
    corpus in a table format, each sentence)."""
    text2_field: str | None = None
    """Table formats: the column holding each pair's second text (as `text2_suffix` does
    for `lines`); None: single texts."""
    label_field: str = "label"
    """Table formats: the column holding each example's label. Labels are read as text
    (a JSON or Parquet integer 2 is the label `2`)."""
    unlabeled: str | None = None
    """The unlabeled corpus, relative to `dir`, read by the pretraining stage
    (`model.pretrain`) and by tokenizer training (`model.tokenizer.train`). Its format
    follows its name: `.txt` one sentence per line; `.jsonl`, `.csv`, `.tsv`, `.parquet`
    the column `text_field`; a folder an `hf_disk` Dataset. Blank texts are skipped.
    None: `unlabeled.txt`, read only when `model.pretrain` is set."""
    splits: dict[SplitName, str] = Field(
        default_factory=lambda: {"train": "train", "valid": "valid", "test": "test"}
    )
    """Name of each split: the file stem with `format: lines` (CLS books uses
    train/valid/test), the `split_field` value with `file`, the DatasetDict key with
    `hf_disk`."""
    text_suffix: str = "review"
    """`format: lines`: raw text files end in this suffix, one review per line."""
    label_suffix: str = "label"
    """`format: lines`: label files end in this suffix, one label per line, aligned
    with the text."""
    text2_suffix: str | None = None
    """Sentence pairs (paraphrase, inference: PAWS-X, XNLI): each example's second text
    is in `{split}.{text2_suffix}`, line by line with the first. Both frameworks get
    RoBERTa's pair layout `<s> A </s></s> B </s>` (fairseq `input0`/`input1`); a pair
    longer than `max_positions` loses tokens from its longer text first. With
    `source: generated`, the demo writes a pair task: do two reviews share an opinion?
    (label `labels[1]`: same, `labels[0]`: opposite). None: single texts."""
    labels: list[str] | Literal["auto"] = Field(default_factory=lambda: ["0", "1"])
    """Allowed labels; their order fixes the class index (class k is `labels[k]`). `auto`:
    the sorted set of the train split's labels (a valid or test label absent from train
    is then an error); the resulting list is recorded in the prepared data and its
    MLflow dataset inputs."""
    generate: GenerateConfig | None = None
    """Generator settings; required when `source: generated`."""
    answers: dict[str, str] | None = None
    """`task: causal_lm` only: label -> answer text, turning labeled texts into prompt ->
    answer pairs (the demo's reviews -> verdicts). Unset: each label line is the answer."""

    @field_validator("labels")
    @classmethod
    def _two_labels(cls, labels: list[str] | str) -> list[str] | str:
        if isinstance(labels, list) and len(labels) < 2:
            raise ValueError(f"give at least 2 labels, or `auto` (got {labels})")
        if isinstance(labels, list) and len(set(labels)) != len(labels):
            raise ValueError(f"labels repeat a value (got {labels})")
        return labels

    @model_validator(mode="after")
    def _suffixes_differ(self) -> DataConfig:
        suffixes = [self.text_suffix, self.label_suffix, self.text2_suffix]
        named = [s for s in suffixes if s is not None]
        if len(set(named)) != len(named):
            raise ValueError(
                f"text_suffix, label_suffix and text2_suffix must differ (got {named})"
            )
        return self

    @model_validator(mode="after")
    def _generated_needs_settings(self) -> DataConfig:
        if self.source == "generated" and self.generate is None:
            raise ValueError("`source: generated` needs a `generate:` block")
        if self.source == "generated" and (self.format != "lines" or self.labels == "auto"):
            raise ValueError("`source: generated` writes `format: lines` with explicit labels")
        return self

    @model_validator(mode="after")
    def _where_the_table_is(self) -> DataConfig:
        if self.format == "lines":
            if self.files is not None or self.file is not None:
                raise ValueError(
                    "`files`/`file` need a table format (jsonl, csv, tsv, parquet, hf_disk); "
                    "`format: lines` reads `{split}.{text_suffix}` and `{split}.{label_suffix}`"
                )
            return self
        if self.text2_suffix is not None:
            raise ValueError(f"`format: {self.format}` reads second texts from `text2_field`")
        if (self.files is None) == (self.file is None):
            raise ValueError(
                f"`format: {self.format}` needs either `files` (one per split) or `file` "
                "(all splits, with `split_field`), not both"
            )
        if self.files is not None and set(self.files) != {"train", "valid", "test"}:
            raise ValueError(f"`files` needs train, valid and test (got {sorted(self.files)})")
        fields = [self.text_field, self.text2_field, self.label_field]
        fields += [self.split_field] if self.file is not None else []
        named = [f for f in fields if f is not None]
        if len(set(named)) != len(named):
            raise ValueError(f"text, text2, label and split fields must differ (got {named})")
        return self
