"""Helpers shared by subcommands: loading a spec or exiting 2 with every problem listed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from sweeper.logs import place_log
from sweeper.spec.load import SpecError, load_spec
from sweeper.spec.schema import SweepSpec

EXIT_BAD_INPUT = 2


def add_spec_argument(parser: argparse.ArgumentParser, overrides: bool = True) -> None:
    parser.add_argument("spec", metavar="SPEC", help="sweep file, e.g. sweeps/demo.yaml")
    if overrides:
        parser.add_argument(
            "overrides",
            nargs="*",
            metavar="FIELD=VALUE",
            help="dotted overrides parsed as YAML, e.g. train.epochs=1 grid.seed=[1]",
        )


def add_margin_argument(parser: argparse.ArgumentParser, default_help: str) -> None:
    """`--margin D`, the equivalence margin (`compare.margin`); a value <= 0 exits 2."""
    parser.add_argument(
        "--margin",
        type=_positive,
        metavar="D",
        help="equivalence margin in the metric's units (accuracy: percentage points): a "
        "comparison whose decision interval lies inside ±D is 'equivalent within ±D' "
        f"({default_help})",
    )


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)


def load_or_exit(path: str, overrides: list[str] | None = None) -> SweepSpec:
    """Load a spec; on any problem print them all and exit 2 before anything starts.
    The command's third-party log file goes to the spec's `output_dir/logs/`."""
    try:
        spec = load_spec(path, overrides or [])
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    place_log(Path(spec.output_dir))  # the third-party log lies beside the sweep's outputs
    return spec
