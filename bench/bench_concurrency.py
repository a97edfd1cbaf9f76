"""Concurrency: one trial at a time at its best thread count, against two at a time.

    python bench/bench_concurrency.py              # both workloads (see below)
    python bench/bench_concurrency.py --epochs 5   # the demo's own length (~3 min longer)
    python bench/bench_concurrency.py --quick      # 1 seed, 1 epoch: checks the script

Two workloads, each run three ways in a fresh output folder (new MLflow store, new
trial folders):

- **demo**: sweeps/demo.yaml (3 seeds × {pretrained, random} × {fairseq, hf}, 3 epochs
  by default instead of 5, to keep `make bench` short), with the cached prepared data,
  pretrained checkpoint and initial weights copied in (untimed; see common.py);
- **4×512**: the demo's data with the lab's encoder shape (4 layers, 512 dim, 2048 FFN,
  8 heads), random init, 2 seeds × {fairseq, hf}, 288 training examples for one epoch
  (36 updates); its data is prepared once, untimed (`sweeper prepare`).

The three ways: one at a time with 1 thread, one at a time with 2 threads
(`resources.cpu: 2`), two at a time with 1 thread each (`resources.cpu: 1`, what
sweeper's demo sets). Threads per trial follow resources.cpu
(`sweeper.trainers.runner.thread_env`). The speedup is the faster of the two
one-at-a-time sweeps over the two-at-a-time one (target >= 1.8 on 2 cores, limit 2.0),
over the sweeps' walls and over their trials' spans (from the first trainer's start to
the last trial run's end: the sweep's fixed start and end, Ray's start and stop among
them, are the same in every setup and are measured in "Overhead per trial").
Reported per sweep: wall, trials' span, machine-wide CPU utilisation (other jobs included), CPU
seconds of the sweep's own process tree (driver, Ray, trainers; scanned once a second)
as a share of all cores over its wall, and of those the engine's (every process but the
trainers: what one at a time runs on the idle core and two at a time takes from a
trainer), the trainers' own wall time per trial (process start to exit: where a thread
count helps or hurts), and the trainer processes' kernel counters per second of their
lives (`common.counters`: CPU seconds, and run_delay, the time waiting for a core). A
trainer slower beside another one with about 1 CPU s per s and no waiting got a slower
core, not less of one (the two share the machine's caches, memory and, on a VM, the
host).

The ceiling: one demo trial's bare trainer per framework (its own command, no sweeper,
no Ray) alone, two copies at once, alone again: the speedup the cores themselves give
two trainers, which no engine can beat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import bench_overhead
import common

TITLE = "Concurrency"
EPOCHS, QUICK_EPOCHS = 3, 1
TARGET, LIMIT = 1.8, 2.0
SETUPS = (
    ("1 at a time, 1 thread", 1, 1),
    ("1 at a time, 2 threads", 1, 2),
    ("2 at a time, 1 thread each", 2, 1),
)
"""(label, max_concurrent, resources.cpu)"""
WIDE = {
    "model.arch": {"layers": 4, "embed_dim": 512, "ffn_dim": 2048, "heads": 8,
                   "max_positions": 64},
    "data.generate.train_size": 288,
    "grid.init": ["random"],
    "grid.seed": [1, 2],
    "train.epochs": 1,
}  # fmt: skip
"""The 4×512 workload's changes to the demo spec (36 updates per trial)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    parser.add_argument("--epochs", type=int, help=f"epochs per trial (default {EPOCHS})")
    return parser


def changes(concurrent: int, cpu: int) -> dict[str, Any]:
    """A setup's changes: how many trials at once, and threads (CPUs) per trial."""
    return {"max_concurrent": concurrent, "resources": {"cpu": cpu}, "retries": 0}


def workloads(args: argparse.Namespace, epochs: int) -> dict[str, dict[str, Any]]:
    """Workload name -> its changes to the demo spec (before the setup's own)."""
    one_seed = {"grid.seed": [1]} if args.quick else {}
    return {"demo": {"train.epochs": epochs, **one_seed}, "4x512": {**WIDE, **one_seed}}


def best_speedup(results: dict[str, dict[str, Any]], key: str = "wall") -> tuple[str, float]:
    """(the faster one-at-a-time setup, its `key` seconds (the sweep's wall, or its
    trials' span) over the two-at-a-time setup's)."""
    serial = {label: r[key] for label, r in results.items() if label.startswith("1 at")}
    fastest = min(serial, key=serial.__getitem__)
    return fastest, common.ratio(serial[fastest], results[SETUPS[-1][0]][key])


def run_setup(
    args: argparse.Namespace, workload: str, base: dict[str, Any], concurrent: int, cpu: int
) -> dict[str, Any]:
    """One timed sweep; returns its wall, CPU figures and trainers' wall times."""
    from sweeper import record_names

    name = f"concurrency-{workload}-{concurrent}x{cpu}"
    spec, out = common.new_sweep(
        args.workdir / "concurrency",
        name,
        {**base, **changes(concurrent, cpu)},
    )
    if workload != "demo":  # its own data: prepared once per sweep folder, untimed
        common.run_timed(common.sweeper_command("prepare", spec), env=common.clean_env())
    before = common.cpu_times()
    timed = common.run_timed(
        common.sweeper_command("run", spec), env=common.clean_env(), trace=common.is_trainer
    )
    busy = common.utilisation(before, common.cpu_times())
    client = _client(out)
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    trials = [r for r in runs if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_TRIAL]
    trainer = [
        r.data.metrics[record_names.METRIC_WALL_TIME]
        for r in trials
        if record_names.METRIC_WALL_TIME in r.data.metrics
    ]
    # The trials' span: from the first trainer's start (its job file is written as it
    # starts) to the last trial run's end; the sweep's own start and end (Ray, store,
    # summary: "Overhead per trial") are outside it.
    first = min(
        (p / record_names.TRIAL_CONFIG_FILE).stat().st_mtime for p in (out / "trials").iterdir()
    )
    span = max(r.info.end_time for r in trials) / 1000 - first
    found = [common.counters(t) for t in timed.traced]
    return {
        "wall": timed.wall,
        "span": span,
        "cpu": timed.cpu,
        "busy": busy,
        "trainer": trainer,
        "trainer_cpu": common.median([c["cpu"] for c in found]),
        "trainer_waited": common.median([c["waited"] for c in found]),
        # the engine: every process of the sweep's tree but the trainers (driver, Ray's
        # daemons, the trial actors), each as last read by the once-a-second scan
        "engine": timed.cpu - sum(t.last.cpu for t in timed.traced),
        "out": out,
    }


def bare_ceiling(work: Path, trials: Path) -> dict[str, dict[str, Any]]:
    """Per framework, the bare trainer of one demo trial (no sweeper, no Ray) twice one
    after the other, then two copies at once: what this machine's cores give two
    trainers side by side, a ceiling for any engine's speedup."""
    jobs: dict[str, dict[str, Any]] = {}
    for folder in sorted(trials.iterdir()):
        job = json.loads((folder / "trial.json").read_text(encoding="utf-8"))
        jobs.setdefault(job["framework"], job)
    work.mkdir(parents=True, exist_ok=True)
    run = {"env": common.clean_env(threads=1), "cwd": work, "trace": common.is_trainer}
    found: dict[str, dict[str, Any]] = {}
    for framework, job in sorted(jobs.items()):
        command = {
            name: bench_overhead.bare_command(job, work / f"{framework}-{name}")
            for name in ("alone0", "pair0", "pair1", "alone1")
        }
        # alone, two at once, alone: a machine warming up or slowing down over the
        # minute shows in the two alone runs instead of favouring one side
        first = common.run_timed(command["alone0"], **run)
        pair = common.run_together([command["pair0"], command["pair1"]], **run)
        solo = [first, common.run_timed(command["alone1"], **run)]
        found[framework] = {
            "alone": [t.wall for t in solo],
            "pair": [t.wall for t in pair],
            "together": common.together_wall(pair),
            "counters": {
                "alone": [common.counters(t) for a in solo for t in a.traced],
                "pair": [common.counters(t) for p in pair for t in p.traced],
            },
        }
        print(f"bare {framework}: alone {found[framework]['alone']}, two at once "
              f"{found[framework]['together']:.1f} s", flush=True)  # fmt: skip
    return found


def _client(out):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{out / 'mlflow.db'}")


def report(
    results: dict[str, dict[str, dict[str, Any]]],
    epochs: int,
    head: list[str],
    ceiling: dict[str, dict[str, Any]],
) -> str:
    lines = [*head, "", __doc__.split("\n\n", 2)[2].strip()]
    cores = len(os.sched_getaffinity(0))
    for workload, by_setup in results.items():
        n = len(next(iter(by_setup.values()))["trainer"])
        updates = f"{epochs * 225} updates" if workload == "demo" else "36 updates"
        lines += ["", f"**{workload}**: {n} trials of {updates} each.", ""]
        rows = []
        for label, found in by_setup.items():
            trainer = found["trainer"]
            rows.append(
                [
                    label,
                    f"{found['wall']:.1f}",
                    f"{found['span']:.1f}",
                    f"{100 * found['busy']:.0f}%",
                    f"{found['cpu']:.0f} ({100 * found['cpu'] / (found['wall'] * cores):.0f}%)",
                    f"{found['engine']:.1f} ({found['engine'] / found['wall']:.2f})",
                    f"{common.median(trainer):.1f}",
                    f"{sum(trainer):.0f}",
                    f"{found['trainer_cpu']:.2f} / {found['trainer_waited']:.3f}",
                ]
            )
        lines += common.table(
            [
                "setup",
                "sweep wall (s)",
                "trials' span (s)",
                "CPU busy (whole machine)",
                f"CPU s of the sweep's processes (% of {cores} cores × wall)",
                "of which the engine's: all but the trainers (cores used on average)",
                "trainer wall per trial, median (s)",
                "trainer wall, sum (s)",
                "trainer CPU s / waiting s per s (medians)",
            ],
            rows,
        )
        fastest, value = best_speedup(by_setup)
        _, over_span = best_speedup(by_setup, "span")
        lines += [
            "",
            f"Speedup of 2 at a time over the best one at a time ({fastest}): {value:.2f} "
            f"(target >= {TARGET}, limit {LIMIT}): {speedup_verdict(value)}. Over the "
            f"trials' span (the sweep's fixed start and end left out): {over_span:.2f}, "
            f"{speedup_verdict(over_span)}.",
        ]
        if workload == "demo" and ceiling:
            lines += ceiling_lines(ceiling, over_span)
    return "\n".join(lines) + "\n"


def mix_ceiling(ceiling: dict[str, dict[str, Any]]) -> float:
    """Both frameworks' two runs alone over both pairs' joint walls: the ceiling for the
    demo's mix (as many fairseq trials as HF ones)."""
    alone = sum(sum(found["alone"]) for found in ceiling.values())
    return common.ratio(alone, sum(found["together"] for found in ceiling.values()))


def ceiling_lines(ceiling: dict[str, dict[str, Any]], sweep_span: float) -> list[str]:
    lines = [
        "",
        "**Ceiling: two bare trainers at once** (no sweeper, no Ray; 1 thread each): "
        "alone, two copies at once, alone again.",
        "",
    ]
    rows = []
    for framework, found in ceiling.items():
        counted = found["counters"]
        rows.append(
            [
                framework,
                " / ".join(f"{w:.1f}" for w in found["alone"]),
                " / ".join(f"{w:.1f}" for w in found["pair"]),
                f"{found['together']:.1f}",
                f"{common.ratio(sum(found['alone']), found['together']):.2f}",
                *(
                    f"{common.median([c['cpu'] for c in counted[k]]):.2f} / "
                    f"{common.median([c['waited'] for c in counted[k]]):.3f}"
                    for k in ("alone", "pair")
                ),
            ]
        )
    lines += common.table(
        [
            "trainer",
            "alone, two runs (s)",
            "two at once, each (s)",
            "two at once, together (s)",
            "ceiling (both alone / together)",
            "CPU s / waiting s per s, alone",
            "CPU s / waiting s per s, at once",
        ],
        rows,
    )
    mix = mix_ceiling(ceiling)
    lines += [
        "",
        f"Ceiling for the demo's mix (both trainers): {mix:.2f}; the sweep's 2 at a time "
        f"over its best one at a time, over the trials' span: {sweep_span:.2f} "
        f"({sweep_span - mix:+.2f} against the ceiling).",
    ]
    return lines


def speedup_verdict(value: float) -> str:
    """Above the limit the comparison itself is off: 2 trials on 2 cores cannot be more
    than twice as fast unless the 1-at-a-time baseline wastes its second core."""
    if value > LIMIT:
        return "above the limit: the comparison itself is off (compare the trainer walls)"
    return common.verdict(value, TARGET, higher_is_better=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    epochs = args.epochs or (QUICK_EPOCHS if args.quick else EPOCHS)
    print(f"demo inputs ready in {common.ensure_inputs():.1f} s (not timed)", flush=True)
    common.warm_imports()
    shutil.rmtree(args.workdir / "concurrency", ignore_errors=True)
    info, start_load = common.machine(), common.load_average()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for workload, base in workloads(args, epochs).items():
        results[workload] = {}
        for label, concurrent, cpu in SETUPS:
            found = run_setup(args, workload, base, concurrent, cpu)
            print(f"{workload}, {label}: {found['wall']:.1f} s, CPU busy "
                  f"{100 * found['busy']:.0f}%", flush=True)  # fmt: skip
            results[workload][label] = found
    ceiling = bare_ceiling(
        args.workdir / "concurrency" / "bare", results["demo"][SETUPS[0][0]]["out"] / "trials"
    )
    command = common.command_line("bench_concurrency.py", argv)
    text = report(results, epochs, common.header(TITLE, command, info, start_load), ceiling)
    common.publish(TITLE, text, not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
