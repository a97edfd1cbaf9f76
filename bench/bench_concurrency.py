"""Concurrency: the demo sweep with 1 and with 2 trials at once on this machine's cores.

    python bench/bench_concurrency.py              # 12 trials, 3 epochs each (see below)
    python bench/bench_concurrency.py --epochs 5   # the demo's own length (~2 min longer)
    python bench/bench_concurrency.py --quick      # 4 trials, 1 epoch: checks the script

Both sweeps are sweeps/demo.yaml (3 seeds × {pretrained, random} × {fairseq, hf}) in a
fresh output folder (new MLflow store, new trial folders) holding the cached prepared
data, pretrained checkpoint and initial weights (copied, untimed; see common.py):

- 1 at a time: `--max-concurrent 1` with `resources.cpu: 2`, so each trial gets 2 threads;
- 2 at a time: `--max-concurrent 2` with `resources.cpu: 1`, 1 thread each.

Threads per trial follow resources.cpu (`sweeper.trainers.runner.thread_env`). The
demo's 5 epochs are cut to 3 by default to keep `make bench` under 20 minutes; every
per-sweep and per-trial fixed cost is unchanged, so the speedup is if anything harder
to reach than at 5. Reported: wall, speedup (1-at-a-time wall / 2-at-a-time wall;
target >= 1.7, limit 2.0), machine-wide CPU utilisation over the sweep (other jobs
included), CPU seconds of the sweep's own process tree (driver, Ray, trainers; scanned
once a second) as a share of all cores over its wall, and the trainers' own wall time
per trial (process start to exit).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

import common

TITLE = "Concurrency"
EPOCHS, QUICK_EPOCHS = 3, 1
TARGET, LIMIT = 1.7, 2.0
SETUPS = (("1 at a time, 2 threads each", 1, 2), ("2 at a time, 1 thread each", 2, 1))
"""(label, max_concurrent, resources.cpu)"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    parser.add_argument("--epochs", type=int, help=f"epochs per trial (default {EPOCHS})")
    return parser


def changes(epochs: int, concurrent: int, cpu: int, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"train.epochs": epochs, "max_concurrent": concurrent}
    out["resources"] = {"cpu": cpu}
    out["retries"] = 0
    if quick:
        out["grid.seed"] = [1]
    return out


def speedup(serial_wall: float, parallel_wall: float) -> float:
    return common.ratio(serial_wall, parallel_wall)


def run_setup(args: argparse.Namespace, epochs: int, concurrent: int, cpu: int) -> dict[str, Any]:
    """One timed sweep; returns its wall, CPU figures and trainers' wall times."""
    from sweeper import layout

    name = f"concurrency-{concurrent}"
    spec, out = common.new_sweep(
        args.workdir / "concurrency", name, changes(epochs, concurrent, cpu, args.quick)
    )
    before = common.cpu_times()
    timed = common.run_timed(common.sweeper_command("run", spec), env=common.clean_env())
    busy = common.utilisation(before, common.cpu_times())
    client = _client(out)
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    trainer = [
        r.data.metrics[layout.METRIC_WALL_TIME]
        for r in runs
        if r.data.tags.get(layout.TAG_ROLE) == layout.ROLE_TRIAL
        and layout.METRIC_WALL_TIME in r.data.metrics
    ]
    return {"wall": timed.wall, "cpu": timed.cpu, "busy": busy, "trainer": trainer}


def _client(out):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{out / 'mlflow.db'}")


def report(
    results: list[tuple[str, int, int, dict[str, Any]]], epochs: int, head: list[str]
) -> str:
    lines = [*head, "", __doc__.split("\n\n", 2)[2].strip(), ""]
    n = len(results[0][3]["trainer"]) if results else 0
    lines += [f"{n} trials of {epochs} epochs ({epochs * 225} updates) each.", ""]
    rows, cores = [], len(os.sched_getaffinity(0))
    for label, _, _, found in results:
        trainer = found["trainer"]
        rows.append(
            [
                label,
                f"{found['wall']:.1f}",
                f"{100 * found['busy']:.0f}%",
                f"{found['cpu']:.0f} ({100 * found['cpu'] / (found['wall'] * cores):.0f}%)",
                f"{common.median(trainer):.1f}",
                f"{sum(trainer):.0f}",
            ]
        )
    lines += common.table(
        [
            "setup",
            "sweep wall (s)",
            "CPU busy (whole machine)",
            f"CPU s of the sweep's processes (% of {cores} cores × wall)",
            "trainer wall per trial, median (s)",
            "trainer wall, sum (s)",
        ],
        rows,
    )
    if len(results) == 2:
        value = speedup(results[0][3]["wall"], results[1][3]["wall"])
        lines += [
            "",
            f"Speedup of 2 at a time over 1 at a time: {value:.2f} (target >= {TARGET}, limit "
            f"{LIMIT}): {speedup_verdict(value)}.",
        ]
    return "\n".join(lines) + "\n"


def speedup_verdict(value: float) -> str:
    """Above the limit the comparison itself is off: 2 trials on 2 cores cannot be more
    than twice as fast unless the 1-at-a-time baseline wastes its second core."""
    if value > LIMIT:
        return (
            "above the limit: the 1-at-a-time baseline is slowed by its second thread "
            "(compare the trainer wall per trial)"
        )
    return common.verdict(value, TARGET, higher_is_better=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    epochs = args.epochs or (QUICK_EPOCHS if args.quick else EPOCHS)
    print(f"demo inputs ready in {common.ensure_inputs():.1f} s (not timed)", flush=True)
    common.warm_imports()
    shutil.rmtree(args.workdir / "concurrency", ignore_errors=True)
    info, start_load = common.machine(), common.load_average()
    results = []
    for label, concurrent, cpu in SETUPS:
        found = run_setup(args, epochs, concurrent, cpu)
        print(f"{label}: {found['wall']:.1f} s, CPU busy {100 * found['busy']:.0f}%", flush=True)
        results.append((label, concurrent, cpu, found))
    command = common.command_line("bench_concurrency.py", argv)
    text = report(results, epochs, common.header(TITLE, command, info, start_load))
    print(text)
    if not args.no_doc:
        common.write_section(TITLE, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
