"""Check sweep files against the schema and report every problem at once.

Each problem names the file, the field path and what was expected. Exit code 0 when
every file is valid, 2 otherwise. `--strict` also checks that the files a spec
references exist (data splits, sentencepiece model, dict, checkpoint).

  sweeper validate sweeps/*.yaml
  sweeper validate --strict sweeps/roberta.yaml
"""

from __future__ import annotations

import argparse
import sys

from sweeper.cli.common import EXIT_BAD_INPUT
from sweeper.specio import SpecError, check_files, load_spec
from sweeper.trials import expand


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="sweep files to check")
    parser.add_argument(
        "--strict", action="store_true", help="also require every referenced file to exist"
    )


def run(args: argparse.Namespace) -> int:
    failed = False
    for path in args.specs:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            failed = True
            for problem in exc.problems:
                print(f"error: {problem}", file=sys.stderr)
            continue
        problems = check_files(spec, path) if args.strict else []
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        failed = failed or bool(problems)
        trials, skipped = expand(spec)
        if not problems:
            print(f"{path}: ok, sweep '{spec.name}', {len(trials)} trials")
        for skip in skipped:
            print(f"  note: skipped {skip.combination}: {skip.reason}")
    return EXIT_BAD_INPUT if failed else 0
