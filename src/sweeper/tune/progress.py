"""The live view of a running sweep: each trial's status, step, best validation, ETA.

On a terminal it is a `rich.live` table redrawn in place; anywhere else (a log file,
`ray job submit`, CI) it is one plain line per event, e.g.
`[3/12 done] hf-pretrained-full-s1: step 450/1125 valid 81.0 (best 81.0) eta 40s`,
so a sweep's log reads as a history. Trials are keyed by trial key; the callback that
feeds this view (`sweeper.tune.callback`) knows nothing about how it is drawn. A trial's
"best valid" is picked by `sweeper.selection`, the rule the record and the tables use
(docs/architecture.md, invariant 3).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from sweeper.selection import ACCURACY, Selection, is_better

PENDING, RUNNING, RETRYING, PREEMPTED, FINISHED, FAILED, DONE_BEFORE = (
    "pending",
    "running",
    "retrying",
    "preempted",
    "finished",
    "failed",
    "done before",
)


@dataclass
class TrialView:
    """What the view knows about one trial."""

    name: str
    total: int
    """Updates the trial makes in all (epochs × updates per epoch)."""
    status: str = PENDING
    step: int = 0
    valid: float | None = None
    best: float | None = None
    best_step: int | None = None
    best_test: float | None = None
    wall_time: float | None = None
    """Trainer seconds at `step` (since its latest (re)start)."""
    attempts: int = 0
    first: tuple[int, float] | None = None
    """(step, wall time) of the current attempt's first report: the rate is measured
    from there, leaving out start-up time and steps done by an earlier attempt."""
    selection: Selection = ACCURACY
    """Which reported metric is "valid" and "best" here, and its test value."""

    def eta(self) -> float | None:
        """Seconds left at the rate of the current attempt (None before any report)."""
        if self.status != RUNNING or not self.wall_time or self.step <= 0:
            return None
        if self.first is not None and self.step > self.first[0]:
            rate = (self.wall_time - self.first[1]) / (self.step - self.first[0])
        else:
            rate = self.wall_time / self.step
        return max(0.0, rate * (self.total - self.step))

    def restart(self, attempt: int) -> None:
        self.status, self.attempts, self.wall_time, self.first = RUNNING, attempt, None, None

    def update(self, result: dict[str, Any]) -> None:
        """Take in one validation report (see sweeper.tune.trainable.Reporter)."""
        self.step = int(result.get("step") or self.step)
        self.wall_time = result.get("wall_time", self.wall_time)
        if self.first is None and self.wall_time is not None:
            self.first = (self.step, float(self.wall_time))
        valid = result.get(self.selection.metric)
        if valid is None:
            return
        self.valid = float(valid)
        if is_better(self.valid, self.best, self.selection.mode):  # strict: ties keep the earliest
            self.best, self.best_step = self.valid, self.step
            test = result.get(self.selection.primary)
            self.best_test = float(test) if test is not None else None


def duration(seconds: float | None) -> str:
    """Compact duration: `45s`, `3m05s`, `1h02m`; `?` when unknown."""
    if seconds is None:
        return "?"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _acc(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def step_text(view: TrialView) -> str:
    """`step 450/1125 valid 81.0 (best 81.0) eta 40s` (eta left out when unknown)."""
    text = f"step {view.step}/{view.total} valid {_acc(view.valid)} (best {_acc(view.best)})"
    eta = view.eta()
    return text if eta is None else f"{text} eta {duration(eta)}"


def finished_text(view: TrialView) -> str:
    at = f" at step {view.best_step}" if view.best_step is not None else ""
    return f"finished: best valid {_acc(view.best)}{at}, test there {_acc(view.best_test)}"


class Progress:
    """Trial views plus a renderer: plain lines, or a rich live table on a TTY."""

    def __init__(
        self, views: dict[str, TrialView], stream: TextIO | None = None, live: bool | None = None
    ):
        self.views = views
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.started_at = time.monotonic()
        self._live: Any = None

    # --- counts ---------------------------------------------------------------------

    def done(self) -> int:
        return sum(v.status in (FINISHED, FAILED, DONE_BEFORE) for v in self.views.values())

    def prefix(self) -> str:
        return f"[{self.done()}/{len(self.views)} done]"

    # --- events ---------------------------------------------------------------------

    def started(self, key: str, attempt: int = 0) -> None:
        view = self.views[key]
        view.restart(attempt)
        again = f" (retry {attempt})" if attempt else ""
        self._event(key, f"started{again}")

    def result(self, key: str, result: dict[str, Any]) -> None:
        view = self.views[key]
        view.update(result)
        if result.get(view.selection.metric) is not None:
            self._event(key, step_text(view))

    def retrying(self, key: str, failures: int, reason: str) -> None:
        self.views[key].status = RETRYING
        self._event(key, f"failed (attempt {failures}), retrying: {reason}", loud=True)

    def preempted(self, key: str, reason: str) -> None:
        """A trial left its node on a preemption notice; no retry is spent."""
        self.views[key].status = PREEMPTED
        self._event(key, reason, loud=True)

    def finished(self, key: str) -> None:
        view = self.views[key]
        view.status, view.step = FINISHED, view.total
        self._event(key, finished_text(view))

    def failed(self, key: str, reason: str) -> None:
        self.views[key].status = FAILED
        self._event(key, f"FAILED: {reason}", loud=True)

    def note(self, text: str) -> None:
        """A line about the sweep as a whole (printed in both modes)."""
        if self._live is not None:
            self._live.console.print(text, highlight=False, markup=False)
        else:
            print(text, file=self.stream, flush=True)

    def _event(self, key: str, text: str, loud: bool = False) -> None:
        line = f"{self.prefix()} {self.views[key].name}: {text}"
        if self._live is None:
            print(line, file=self.stream, flush=True)
            return
        if loud:
            self._live.console.print(line, highlight=False, markup=False)
        self._live.refresh()

    # --- live mode ------------------------------------------------------------------

    def __enter__(self) -> Progress:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream)
            # a callable renderable: every refresh redraws elapsed time and ETAs
            self._live = Live(console=console, refresh_per_second=2, get_renderable=self.table)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.__exit__(*exc)
            self._live = None

    def table(self) -> Any:
        """The rich table of every trial (live mode)."""
        from rich.table import Table

        elapsed = duration(time.monotonic() - self.started_at)
        table = Table(title=f"{self.prefix()}  elapsed {elapsed}", title_justify="left")
        for column, justify in (
            ("trial", "left"), ("status", "left"), ("step", "right"),
            ("valid", "right"), ("best valid", "right"), ("ETA", "right"),
        ):  # fmt: skip
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for view in self.views.values():
            eta = view.eta()
            table.add_row(
                view.name,
                view.status if not view.attempts else f"{view.status} (retry {view.attempts})",
                f"{view.step}/{view.total}",
                _acc(view.valid),
                _acc(view.best),
                duration(eta) if eta is not None else "",
            )
        return table
