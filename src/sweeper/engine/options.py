"""What one `sweeper run` invocation was asked to do, and how it reports bad input.

`RunOptions` is the engine's view of the command line, typed: the grid engine and the
search stage read it, never `argparse.Namespace`, so they can be driven from tests or
other front ends. `SweepError` carries a message the user can act on and the exit
status it stands for; the CLI prints `error: MESSAGE` and exits with that status
(docs/architecture.md, invariant 5).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweeper.spec.schema import SweepSpec
    from sweeper.summarize.records import SequentialPlan

EXIT_FAILED = 1
"""A trial failed past its retries, or the tracking store stayed unreachable."""
EXIT_BAD_INPUT = 2
"""Bad input (spec, data, store, existing runs without --resume), before any trial."""


class SweepError(Exception):
    """A problem the user can fix, with the exit status it stands for."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True)
class RunOptions:
    """The options of one `sweeper run` (see `sweeper run --help`)."""

    spec_path: str
    """The sweep file as given (recorded on the parent run, repeated in hints)."""
    overrides: tuple[str, ...] = ()
    """`FIELD=VALUE` overrides as given."""
    resume: bool = False
    force_lease: bool = False
    """--force-resume: take the sweep's driver lease from a holder known to be dead."""
    address: str | None = None
    """Ray cluster; None: $RAY_ADDRESS, else an embedded Ray."""
    tracking_uri: str | None = None
    """MLflow store; None: the one `sweeper.deploy.resolve` finds for the spec (the
    spec's, $MLFLOW_TRACKING_URI, a running cluster's, else SQLite in output_dir)."""
    max_concurrent: int | None = None
    """Trials at once; None: the spec's."""
    figures: bool = False
    """--figures: the closing summary draws its figures too (else `sweeper summarize`)."""
    stamp: str = field(default_factory=lambda: time.strftime("%Y%m%d-%H%M%S"))
    """When this driver started: names its Ray log file and its Tune experiments."""

    def resume_command(self) -> str:
        """The command that continues this sweep (printed when something is left)."""
        return " ".join(["sweeper run", self.spec_path, *self.overrides, "--resume"])


@dataclass(frozen=True)
class Budget:
    """How far `--until-decided` may go."""

    max_seeds: int
    """Seeds per group at most, the grid's own included."""
    batch: int
    """Seeds added per round."""

    def plan(self, spec: SweepSpec) -> SequentialPlan:
        """The sequential plan this budget and the spec fix before the first look."""
        from sweeper.summarize.decide import ALPHA
        from sweeper.summarize.records import SequentialPlan

        return SequentialPlan(
            start=len(spec.grid.seed),
            batch=self.batch,
            max_seeds=self.max_seeds,
            alpha=ALPHA,
            margin=spec.compare.margin,
        )
