"""Framework speed: fairseq vs HF training updates per second, same arch, batch and data.

    python bench/bench_frameworks.py            # demo arch (2 epochs), lab's RoBERTa small (1)
    python bench/bench_frameworks.py --quick    # demo arch, 1 epoch: checks the script

Measured through the trainers' own entry points: `sweeper.trainers.runner.run_trainer`
runs sweeper's fairseq and HF trainers (the subprocesses every trial runs) on the
demo's token ids, batch 8, random init, seed 1, one thread, on CUDA when this machine
has it (`detect_device`), else CPU. Their train events arrive every 25 updates and are
timed by the parent's clock; updates per second are taken over each 25-update interval
that contains no validation (valid and test are evaluated at every epoch end), the
first interval of each run excluded as warm-up; the figure is the median over those
intervals. So it is the speed of a training step as each framework runs it (forward,
backward, optimizer, data loading, its logging), not of start-up or evaluation.

Both arches keep the demo data's max_positions (64): its sentences have at most 21
tokens, so the lab's 256 positions would change only an unused embedding table. A
difference in updates per second is the part of a framework difference that is speed;
the models and inputs are otherwise identical (docs/architecture.md, invariant 2).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import common

TITLE = "Framework speed"
QUICK_EPOCHS = 1
LOG_INTERVAL = 25
ARCHS: dict[str, tuple[dict[str, int], int]] = {
    "demo (2 layers, 64 dim)": ({"layers": 2, "embed_dim": 64, "ffn_dim": 128, "heads": 4}, 2),
    "lab RoBERTa small (4 layers, 512 dim)": (
        {"layers": 4, "embed_dim": 512, "ffn_dim": 512, "heads": 8},
        1,
    ),
}
"""label -> (arch, epochs): one epoch of the lab arch already gives 7 intervals (~35 s
per framework on one CPU thread)."""
FRAMEWORKS = ("fairseq", "hf")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    parser.add_argument("--epochs", type=int, help="epochs per run (default: per arch)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per trainer")
    return parser


def interval_rates(events: list[Any], warmup: int = 1) -> list[float]:
    """Updates per second over consecutive train events with no evaluation between
    them; the first `warmup` such intervals are dropped."""
    rates: list[float] = []
    previous = None
    for event in events:
        if event.split != "train":
            previous = None  # an evaluation ran: the next interval is not pure training
            continue
        if previous is not None and event.step > previous.step:
            elapsed = event.wall_time - previous.wall_time
            if elapsed > 0:
                rates.append((event.step - previous.step) / elapsed)
        previous = event
    return rates[warmup:]


def measure(work: Path, arch: dict[str, int], epochs: int, threads: int) -> dict[str, Any]:
    """Updates/s of each framework for one arch; returns {framework: rates} and device."""
    from sweeper.spec.load import load_spec
    from sweeper.trainers.registry import get_trainer
    from sweeper.trainers.runner import run_trainer
    from sweeper.trainers.trial_pipeline import build_job, prepare_inputs
    from sweeper.trial_keys import make_trial

    name = f"frameworks-{arch['layers']}x{arch['embed_dim']}"
    changes = {"train.epochs": epochs, **{f"model.arch.{k}": v for k, v in arch.items()}}
    path, out = common.new_sweep(work, name, changes)
    spec = load_spec(path)
    inputs = prepare_inputs(spec, log=lambda _: None, need_pretrained=False)
    found: dict[str, Any] = {}
    for framework in FRAMEWORKS:
        trial = make_trial(spec, seed=1, init="random", framework=framework, method="full")
        job = build_job(spec, trial, inputs, out / "trials" / framework, threads=threads)
        job = replace(job, extra={"log_interval": LOG_INTERVAL})
        events: list[Any] = []
        result = run_trainer(get_trainer(framework), job, on_event=events.append)
        found[framework] = interval_rates(events)
        found["device"] = job.device
        found["epochs"] = epochs
        print(
            f"{name} {framework}: median {common.median(found[framework]):.1f} updates/s "
            f"over {len(found[framework])} intervals; trial {result.wall_time:.1f} s",
            flush=True,
        )
    return found


def report(results: dict[str, dict[str, Any]], threads: int, head: list[str]) -> str:
    lines = [*head, "", __doc__.split("\n\n", 2)[2].strip(), ""]
    lines += [f"225 updates per epoch; {threads} thread(s) per trainer.", ""]
    rows = []
    for arch, found in results.items():
        fairseq, hf = common.median(found["fairseq"]), common.median(found["hf"])
        rows.append(
            [
                arch,
                found["epochs"],
                found["device"],
                f"{fairseq:.1f}",
                f"{hf:.1f}",
                f"{common.ratio(fairseq, hf):.2f}",
                f"{len(found['fairseq'])} / {len(found['hf'])}",
                f"{_spread(found['fairseq'])} / {_spread(found['hf'])}",
            ]
        )
    lines += common.table(
        [
            "arch",
            "epochs",
            "device",
            "fairseq updates/s (median)",
            "hf updates/s (median)",
            "fairseq / hf",
            "intervals",
            "interquartile range fairseq / hf",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def _spread(values: list[float]) -> str:
    if len(values) < 4:
        return "-"
    ordered = sorted(values)
    quarter = len(ordered) // 4
    return f"{ordered[quarter]:.0f}-{ordered[-quarter - 1]:.0f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    epochs = args.epochs or (QUICK_EPOCHS if args.quick else None)
    print(f"demo inputs ready in {common.ensure_inputs():.1f} s (not timed)", flush=True)
    common.warm_imports()
    work = args.workdir / "frameworks"
    shutil.rmtree(work, ignore_errors=True)
    info, start_load = common.machine(), common.load_average()
    archs = dict(itertools.islice(ARCHS.items(), 1 if args.quick else None))
    results = {
        label: measure(work, arch, epochs or default, args.threads)
        for label, (arch, default) in archs.items()
    }
    command = common.command_line("bench_frameworks.py", argv)
    text = report(results, args.threads, common.header(TITLE, command, info, start_load))
    common.publish(TITLE, text, not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
