"""Data preparation: raw splits -> sentencepiece -> fairseq ids -> fairseq + HF datasets.

Public API (stable; trainers and the sweep engine build on it):

  prepare(spec, log=print, force=False) -> PreparedData   generate (demo) + prepare, cached
  PreparedData.load(root) -> PreparedData                 reopen a prepared folder
  DataError                                               bad input, message "FILE:LINE: ..."

Importing this package is cheap: torch, fairseq and sentencepiece load only inside the
functions that need them.
"""

from __future__ import annotations

from sweeper.data.errors import DataError
from sweeper.data.prepare import prepare
from sweeper.data.prepared import PreparedData

__all__ = ["DataError", "PreparedData", "prepare"]
