"""Data preparation: raw splits -> sentencepiece -> fairseq ids -> fairseq + HF datasets.

The labeled splits come as line files or as tables (JSON Lines, CSV, TSV, Parquet,
`datasets` folders); the vocabulary is given as files or trained from the data.

Public API (stable; trainers and the sweep engine build on it):

  prepare(spec, log=print, force=False) -> PreparedData   generate (demo) + prepare, cached
  PreparedData.load(root) -> PreparedData                 reopen a prepared folder
  DataError                                               bad input, message "FILE:LINE: ..."

  prepare.py      `prepare(spec)`: raw splits -> one encoding -> both datasets, cached
  prepared.py     `PreparedData`: the handle on a prepared folder
  examples.py     a spec's examples in any format: texts, class indices (`labels: auto`),
                  the unlabeled corpus; every check, located, before anything is written
  table_formats.py  JSON Lines / CSV / TSV / Parquet / `hf_disk` tables, one text rule
  rawtext.py      line files (`format: lines`, `.txt` corpora) and the split every format
                  is read into
  trained_vocab.py  `model.tokenizer.train`: sentencepiece + fairseq dict, cached by content
  vocab.py        the shared vocabulary: a sentencepiece model plus fairseq's `dict.txt`
  encode.py       text -> token ids, once, for both frameworks
  binarize.py     writing encoded splits where each framework reads them; reading them back
  split_stats.py  what a researcher checks before trusting a run: lengths, unk, classes
  generate.py     `data.source: generated`: the demo corpus, its sentencepiece and dict
  demo_corpus.py  the demo corpus: French-like book reviews where pretraining helps
  lm_task.py      prompt/answer data of a causal-LM sweep, prepared once, cached
  errors.py       the one exception data preparation raises for bad input

Importing this package is cheap: torch, fairseq and sentencepiece load only inside the
functions that need them.
"""

from __future__ import annotations

from sweeper.data.errors import DataError
from sweeper.data.prepare import prepare
from sweeper.data.prepared import PreparedData

__all__ = ["DataError", "PreparedData", "prepare"]
