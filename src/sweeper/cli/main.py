"""`sweeper` entry point: a registry of subcommands, each imported only when used.

A subcommand module exposes `build_parser(parser)` and `run(args) -> int`; its
docstring is its `--help` text, and its one-line purpose lives in COMMANDS below.
Keeping the registry as strings means `sweeper --help` never pays for (or breaks on)
the heavy imports of any subcommand.

Every subcommand runs inside `sweeper.logs.route_logs`: third-party log records and
warnings go to a log file (named in one line at the end), not to the terminal, unless
`-v`/`--verbose`, which every subcommand accepts.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from sweeper import __version__
from sweeper.logs import route_logs
from sweeper.quick_exit import exit_after_atexit

# name -> (module, one-line purpose). Order is the order shown in --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("sweeper.cli.run", "run a sweep's trials on Ray and record them in MLflow"),
    "summarize": ("sweeper.cli.summarize", "tables, statistics and figures from a sweep's runs"),
    "submit": ("sweeper.cli.submit", "submit `sweeper run` to a Ray cluster as a Ray job"),
    "ui": ("sweeper.cli.ui", "open the MLflow UI on a sweep's tracking store"),
    "cluster": ("sweeper.cli.cluster", "start, inspect or stop a Ray head + MLflow server here"),
    "params": ("sweeper.cli.params", "exact parameter counts of the fairseq and HF models"),
    "validate": ("sweeper.cli.validate", "check sweep files against the schema"),
    "prepare": ("sweeper.cli.prepare", "encode and binarize a sweep's data (cached)"),
    "trial": ("sweeper.cli.trial", "run one trial locally, without Ray or MLflow"),
    "fixture": ("sweeper.cli.fixture", "build stand-ins for the lab's files (lab-size)"),
}


def _top_parser() -> argparse.ArgumentParser:
    lines = "\n".join(f"  {name:<10} {purpose}" for name, (_, purpose) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="sweeper",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Sweeps of NLP fine-tuning trials (seed × init × framework × method),\n"
        "scheduled by Ray Tune, recorded in MLflow, summarised with statistics.",
        epilog=f"commands:\n{lines}\n\n"
        "Run `sweeper COMMAND --help` for a command's options.\n"
        "Example: sweeper run sweeps/demo.yaml train.epochs=1 grid.seed=[1]",
    )
    parser.add_argument("--version", action="version", version=f"sweeper {__version__}")
    parser.add_argument("command", nargs="?", choices=list(COMMANDS), metavar="COMMAND")
    return parser


NO_PHONE_HOME = {"MLFLOW_DISABLE_TELEMETRY": "true", "RAY_USAGE_STATS_ENABLED": "0"}
"""MLflow and Ray report usage to their vendors by default. Research clusters often have
no way out (each attempt then waits on a timeout), and a sweep's traffic should go only
where its spec says. Set before either library loads; an explicit setting wins."""

NO_RUN_LINKS = {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
"""Against a tracking server MLflow prints two links each time a run ends: 26 lines into
a 12-trial sweep's progress view, opening a view that is not the runs table. sweeper
prints its own links."""


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    """`-v`/`--verbose`, which `sweeper.cli.main` gives every subcommand."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show third-party libraries' log lines (INFO and up) and warnings on the "
        "terminal; without it they go to OUTPUT_DIR/logs/sweeper-COMMAND.log (the spec's "
        "output_dir; without a spec, the SQLite store's folder or ~/.sweeper/logs/), named "
        "in one line at the end. Errors reach the terminal either way. `trial`: also the "
        "trainer's own output (its trial folder's trainer.log holds it either way)",
    )


def default_log_folder() -> Path:
    """Where a command's third-party log goes until it knows its outputs' folder:
    `$SWEEPER_HOME/logs` (default ~/.sweeper/logs)."""
    from sweeper.deploy.state import sweeper_home

    return sweeper_home() / "logs"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for name, value in {**NO_PHONE_HOME, **NO_RUN_LINKS}.items():
        os.environ.setdefault(name, value)
    top = _top_parser()
    if not argv or argv[0] in {"-h", "--help"}:
        top.print_help()
        return 0
    if argv[0] == "--version" or argv[0] not in COMMANDS:
        top.parse_args(argv[:1])  # prints version, or the usage error and exits 2
    name = argv[0]
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(
        prog=f"sweeper {name}",
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.build_parser(parser)
    add_verbose_argument(parser)
    args = parser.parse_intermixed_args(argv[1:])  # overrides and options in any order
    try:
        with route_logs(name, default_log_folder(), verbose=args.verbose):
            return int(module.run(args) or 0)
    except BrokenPipeError:  # `sweeper ... | head`: the reader has what it wanted
        _quiet_closed_stdout()
        return 0


def entry() -> None:
    """The `sweeper` console command: `main`, then an exit without the interpreter's
    teardown once the command has finished its work (`sweeper.quick_exit`: the teardown
    of `sweeper run`'s modules is slow). An exception takes the ordinary way out,
    traceback and all."""
    exit_after_atexit(main())


def _quiet_closed_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of a pipe whose
    reader left does not print a second BrokenPipeError at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    entry()
