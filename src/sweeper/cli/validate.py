"""Check sweep files against the schema and report every problem at once.

Each problem names the file, the field path and what was expected. Exit code 0 when
every file is valid, 2 otherwise. `--strict` also checks that the files a spec
references exist (data splits, sentencepiece model, dict, checkpoint). `--show`
prints each spec as sweeper reads it: its `extends:` bases merged in, `${VAR}`s and
overrides applied, defaults filled and paths made absolute.

  sweeper validate sweeps/*.yaml
  sweeper validate --strict sweeps/roberta.yaml
  sweeper validate --show sweeps/lora.yaml               # the resolved spec, as YAML
  sweeper validate --show sweeps/demo.yaml train.lr=3e-4 # with overrides
"""

from __future__ import annotations

import argparse
import sys

from sweeper.cli.common import EXIT_BAD_INPUT
from sweeper.spec.load import SpecError, check_files, load_spec
from sweeper.spec.schema import SweepSpec
from sweeper.trial_keys import expand


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "specs",
        nargs="+",
        metavar="SPEC",
        help="sweep files to check; field.path=value items after them override every file",
    )
    parser.add_argument(
        "--strict", action="store_true", help="also require every referenced file to exist"
    )
    parser.add_argument(
        "--show",
        action="store_true",
        help="print each resolved spec (bases merged, defaults filled) as YAML",
    )


def run(args: argparse.Namespace) -> int:
    failed = False
    overrides = [item for item in args.specs if "=" in item]
    for path in (item for item in args.specs if "=" not in item):
        try:
            spec = load_spec(path, overrides)
        except SpecError as exc:
            failed = True
            for problem in exc.problems:
                print(f"error: {problem}", file=sys.stderr)
            continue
        problems = check_files(spec, path) if args.strict else []
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        failed = failed or bool(problems)
        if args.show:
            print(f"# {path}, resolved")
            print(show(spec), end="")
        trials, skipped = expand(spec)
        if not problems:
            print(f"{path}: ok, sweep '{spec.name}', {len(trials)} trials")
        for skip in skipped:
            print(f"  note: skipped {skip.combination}: {skip.reason}")
    return EXIT_BAD_INPUT if failed else 0


def show(spec: SweepSpec) -> str:
    """The spec as YAML in the schema's field order (the order docs/spec.md documents)."""
    import yaml

    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
