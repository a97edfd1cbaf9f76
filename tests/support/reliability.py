"""The reliability record: what a fault-injection or bad-input test injected and saw.

docs/reliability.md must come from an actual test run, not from memory, so every
scenario test calls `record` with its measured figures; `make reliability` sets
$SWEEPER_RELIABILITY_LOG, runs those tests and turns the JSON lines into the table
(tests/support/reliability_report.py). Outside that target the call does nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

LOG_ENV = "SWEEPER_RELIABILITY_LOG"


def record(scenario: str, injected: str, observed: str, passed: bool = True) -> None:
    """Append one JSON line to the file named by $SWEEPER_RELIABILITY_LOG (no-op when unset).

    Call it after the test's assertions (so `passed` is True for what got there), or
    with passed=False just before failing where the figures are worth keeping anyway.
    One line per call; appends are line-sized so parallel writers do not interleave.
    """
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = {
        "scenario": scenario,
        "injected": injected,
        "observed": observed,
        "passed": bool(passed),
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")
