"""The one undo of what importing fairseq does to a process's logging.

fairseq's import calls `logging.basicConfig(level=DEBUG)`; from then on every library's
debug lines (Ray, matplotlib, urllib3, MLflow's HTTP client) reach the terminal, which
belongs to sweeper's own output: the progress view, the tables. Every in-process path
that imports fairseq (data binarizing in `sweeper run`, `summarize --evaluate`) calls
this afterwards.
"""

from __future__ import annotations

import logging


def quiet_root_logger() -> None:
    logging.getLogger().setLevel(logging.WARNING)
