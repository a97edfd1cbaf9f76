"""Run one trial on this machine, without Ray or MLflow.

The trial is the one the sweep would run for these grid values: same data, same
starting weights, same recipe. It writes metric events (events.jsonl), the trainer's
log (trainer.log: all of the trainer's own output; -v shows it here too), the best
and last checkpoints and their per-example predictions on valid and test
(predictions/valid.json, predictions/test.json) into --out, and prints each
validation point.
Run it again with the same --out and it resumes from the last checkpoint.

  sweeper trial sweeps/demo.yaml --seed 1 --init pretrained --framework fairseq
  sweeper trial sweeps/demo.yaml --seed 2 --init random --framework hf --out /tmp/t
  sweeper trial sweeps/demo.yaml --framework hf --method lora train.epochs=1
  sweeper trial sweeps/demo.yaml --seed 2 --seed-source data_order   # the rest at grid.held_seed
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sweeper import backends
from sweeper.cli.common import EXIT_BAD_INPUT, add_spec_argument, load_or_exit
from sweeper.record_names import SEED_ALL, SEED_SOURCES


def build_parser(parser: argparse.ArgumentParser) -> None:
    add_spec_argument(parser)
    parser.add_argument("--seed", type=int, default=1, help="trial seed (default 1)")
    parser.add_argument("--init", choices=["pretrained", "random"], default="pretrained")
    parser.add_argument(
        "--framework",
        choices=backends.frameworks(),
        default="fairseq",
        help="a registered framework (default fairseq)",
    )
    parser.add_argument("--method", choices=["full", "lora"], default="full")
    parser.add_argument(
        "--seed-source",
        choices=[SEED_ALL, *SEED_SOURCES],
        default=SEED_ALL,
        help="what --seed sets: every source (all, default), or one, the others held at "
        "grid.held_seed (default: the first grid seed)",
    )
    parser.add_argument("--out", type=Path, help="output folder (default: under output_dir)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for the trainer")


def run(args: argparse.Namespace) -> int:
    spec = load_or_exit(args.spec, args.overrides)
    from sweeper.trial_keys import make_trial

    why_not = backends.missing(args.framework, spec.task) or backends.unsupported(
        args.framework, spec.task, args.method
    )
    if why_not is not None:
        print(
            f"error: --framework {args.framework} --method {args.method}: {why_not}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        trial = make_trial(
            spec,
            seed=args.seed,
            init=args.init,
            framework=args.framework,
            method=args.method,
            seed_source=args.seed_source,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _run(spec, trial, args)


def _run(spec, trial, args: argparse.Namespace) -> int:
    from sweeper.data.errors import DataError
    from sweeper.selection import Selection, base_name
    from sweeper.trainers.events import MetricEvent, best_validation
    from sweeper.trainers.runner import TrainerError
    from sweeper.trainers.trial_pipeline import run_trial, trial_dir

    out = args.out or trial_dir(spec, trial)
    print(f"trial {trial.name} (key {trial.key}) -> {out}")

    selection = Selection.of(spec.select)

    def show(event: MetricEvent) -> None:
        if event.split != "train":
            measured = "  ".join(
                f"{name} {value:.4f}" if name == "loss" else f"{name} {value:6.2f}"
                for name, value in sorted(event.values().items(), key=lambda kv: kv[0] == "loss")
                if value is not None
            )
            print(
                f"  step {event.step:>6}  epoch {event.epoch:5.2f}  {event.split:<5} {measured}",
                flush=True,
            )

    def echo(line: str) -> None:  # -v: the trainer's own output, as trainer.log gets it
        print(line, end="" if line.endswith("\n") else "\n", file=sys.stderr, flush=True)

    try:
        result = run_trial(
            spec,
            trial,
            out,
            threads=args.threads,
            on_event=show,
            on_output=echo if getattr(args, "verbose", False) else None,
        )
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TrainerError as exc:
        print(f"error: trial failed: {exc}", file=sys.stderr)
        return 1
    picked = best_validation(result.events, selection)
    if picked is None:
        print("error: the trainer reported no validation point", file=sys.stderr)
        return 1
    best, test = picked
    primary = base_name(selection.primary)
    value = test.value(primary) if test is not None else None
    test_text = f"{value:.2f}" if value is not None else "missing"
    valid_text = f"{best.value(selection.valid_name):.2f}"
    print(
        f"best valid {selection.valid_name} {valid_text} at step {best.step} (epoch "
        f"{best.epoch:.0f}); test {primary} there {test_text}; {result.wall_time:.1f} s"
    )
    if result.trainable_params:
        trainable, total = result.trainable_params
        print(f"trainable parameters {trainable:,} of {total:,}")
    print(f"best checkpoint: {result.checkpoints.best}")
    return 0
