"""Benchmark `sweeper summarize` on SQLite stores of 12, 100 and 1,000 trial runs.

    python bench/bench_summarize.py                 # build (once, cached) and time
    python bench/bench_summarize.py --sizes 12 100  # a subset
    python bench/bench_summarize.py --no-doc        # print only
    python bench/bench_summarize.py --quick         # 12 runs only: checks the script

Each store holds one experiment with a parent run and N trial runs in 4 groups
(fairseq/hf × pretrained/random), logged the way the sweep engine logs them: 10
validation points each (valid/test accuracy and loss, epoch, wall time) and train loss
and learning rate every 25 updates; one run in 50 failed or early-stopped. Stores are
built with log_batch and cached under $TMPDIR/sweeper-bench-summarize/ (a store is
reused only if its build completed).

Timed: the CLI end to end in a fresh process (`sweeper summarize --experiment bench
--tracking-uri ... --out DIR`, which also writes figures and logs the report to the
parent run; median of 3), and in-process phases: imports, search_runs, metric-history
loading by each of the three paths of `sweeper.summarize.load` (read-only SQLite query,
which `auto` picks on SQLite; the SQL store's bulk API; per-run get_metric_history),
the whole `summarize()`, writing tables and figures, and logging the report. The target
is 1,000 runs in at most 10 s. Results are printed and written as the "sweeper summarize"
section of docs/benchmarks.md (replacing an earlier one).
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

from sweeper import layout

TITLE = "sweeper summarize"
EXPERIMENT = "bench"
GROUPS = [("fairseq", "pretrained"), ("fairseq", "random"), ("hf", "pretrained"), ("hf", "random")]
VALID_EVERY = 225
VALID_POINTS = 10
TRAIN_EVERY = 25
CACHE_VERSION = "v2"  # v2: finished runs carry best_* metrics, as the engine logs them


def build_store(folder: Path, n: int) -> str:
    """Build (or reuse) a store of n trial runs; returns its tracking URI."""
    from mlflow import MlflowClient
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    done = folder / "COMPLETE"
    if done.exists():
        return uri
    if folder.exists():
        for path in sorted(folder.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(n)
    client = MlflowClient(uri)
    experiment_id = client.create_experiment(
        EXPERIMENT, artifact_location=(folder / "mlartifacts").resolve().as_uri()
    )
    parent = client.create_run(
        experiment_id, tags={layout.TAG_ROLE: layout.ROLE_SWEEP, layout.TAG_SWEEP: EXPERIMENT}
    ).info.run_id
    for i in range(n):
        framework, init = GROUPS[i % len(GROUPS)]
        seed = i // len(GROUPS) + 1
        status = layout.Status.FINISHED
        if i % 50 == 49:
            status = layout.Status.FAILED if i % 100 == 99 else layout.Status.EARLY_STOPPED
        tags = {
            MLFLOW_PARENT_RUN_ID: parent,
            layout.TAG_ROLE: layout.ROLE_TRIAL,
            layout.TAG_SWEEP: EXPERIMENT,
            layout.TAG_TRIAL_KEY: f"{i:016x}",
            layout.TAG_GROUP: f"{framework}/{init}/full",
            layout.TAG_SEED: str(seed),
            layout.TAG_INIT: init,
            layout.TAG_FRAMEWORK: framework,
            layout.TAG_METHOD: "full",
            layout.TAG_STAGE: "grid",
            layout.TAG_STATUS: status,
            layout.TAG_TRAINABLE_PARAMS: "22830594",
        }
        run_id = client.create_run(experiment_id, tags=tags, run_name=f"run-{i}").info.run_id
        finished = status == layout.Status.FINISHED
        client.log_batch(run_id, metrics=_metrics(rng, init == "pretrained", finished))
        client.set_terminated(run_id, "FAILED" if status == layout.Status.FAILED else "FINISHED")
    client.set_terminated(parent, "FINISHED")
    done.write_text(f"{n} trial runs\n")
    return uri


def _metrics(rng: random.Random, pretrained: bool, finished: bool) -> list:
    """A trial's history; a finished one also carries its best-checkpoint metrics at
    its last step (`tune.trainable.best_points`; earliest best validation point)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    level = 80.0 if pretrained else 65.0
    out = []
    for step in range(TRAIN_EVERY, VALID_EVERY * VALID_POINTS + 1, TRAIN_EVERY):
        out.append(Metric(layout.METRIC_TRAIN_LOSS, rng.uniform(0.2, 0.7), now + step, step))
        out.append(Metric(layout.METRIC_LR, 1e-5 * (1 - step / 2250), now + step, step))
        if step % VALID_EVERY == 0:
            progress = step / (VALID_EVERY * VALID_POINTS)
            valid = level - 10 * (1 - progress) + rng.gauss(0, 1.5)
            test = valid - 1 + rng.gauss(0, 1.5)
            out += [
                Metric(layout.METRIC_VALID_ACC, round(valid, 1), now + step, step),
                Metric(layout.METRIC_VALID_LOSS, rng.uniform(0.3, 0.7), now + step, step),
                Metric(layout.METRIC_TEST_ACC, round(test, 1), now + step, step),
                Metric(layout.METRIC_TEST_LOSS, rng.uniform(0.3, 0.7), now + step, step),
                Metric(layout.METRIC_EPOCH, step / VALID_EVERY, now + step, step),
                Metric(layout.METRIC_WALL_TIME, step * 0.05, now + step, step),
            ]
    if finished:
        valid = {m.step: m.value for m in out if m.key == layout.METRIC_VALID_ACC}
        test = {m.step: m.value for m in out if m.key == layout.METRIC_TEST_ACC}
        best = max(sorted(valid), key=lambda s: (valid[s], -s))
        last = max(valid)
        out += [
            Metric(layout.METRIC_BEST_VALID_ACC, valid[best], now + last, last),
            Metric(layout.METRIC_BEST_TEST_ACC, test[best], now + last, last),
            Metric(layout.METRIC_BEST_STEP, float(best), now + last, last),
            Metric(layout.METRIC_BEST_EPOCH, best / VALID_EVERY, now + last, last),
        ]
    return out


def time_cli(uri: str, out_dir: Path, repeats: int = 3) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + sys) seconds of each CLI run in a fresh process.

    CPU time is reported beside wall time because the dev machines are shared: when
    other jobs hold the cores, wall time grows while CPU time barely moves.
    """
    command = [
        sys.executable,
        "-m",
        "sweeper.cli.main",
        "summarize",
        "--experiment",
        EXPERIMENT,
        "--tracking-uri",
        uri,
        "--out",
        str(out_dir),
    ]
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def time_phases(uri: str) -> dict[str, float]:
    """In-process phases (one process per store, so imports are paid once per row)."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    from sweeper.summarize import log_report, summarize, write_report
    from sweeper.summarize.load import load_histories, load_runs, open_client
    from sweeper.summarize.select import HISTORY_KEYS

    client = open_client(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    timings["imports + client"] = time.perf_counter() - start

    start = time.perf_counter()
    runs = load_runs(client, experiment.experiment_id)
    timings["search_runs (all pages)"] = time.perf_counter() - start
    ids = [r.run_id for r in runs if r.role == layout.ROLE_TRIAL]

    for label, path in (
        ("histories, read-only SQLite query (auto)", "sqlite"),
        ("histories, SQL store get_metric_history_bulk", "bulk"),
        ("histories, per-run get_metric_history", "per_run"),
    ):
        start = time.perf_counter()
        load_histories(client, ids, HISTORY_KEYS, path)
        timings[label] = time.perf_counter() - start

    start = time.perf_counter()
    summary = summarize(EXPERIMENT, uri, client=client)
    timings["summarize() total (load + select + stats)"] = time.perf_counter() - start

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        files = write_report(summary, Path(out))
        timings["write_report (tables + 2 figures)"] = time.perf_counter() - start
        start = time.perf_counter()
        log_report(client, summary, files)
        timings["log_report (artifacts + metrics)"] = time.perf_counter() - start
    return timings


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


SIZES = [12, 100, 1000]
QUICK_SIZES = [12]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", help=f"default {SIZES}; --quick: 12")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "sweeper-bench-summarize"
    )
    common.add_common_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    info = common.machine()
    start_load = common.load_average()
    rows = []
    for n in args.sizes:
        folder = args.cache / CACHE_VERSION / f"n{n}"
        start = time.perf_counter()
        uri = build_store(folder, n)
        built = time.perf_counter() - start
        phases = subprocess.run(
            [sys.executable, __file__, "--phases", uri], check=True, capture_output=True, text=True
        ).stdout
        phase_times = dict(
            (k, float(v))
            for k, v in (line.rsplit("\t", 1) for line in phases.splitlines() if "\t" in line)
        )
        with tempfile.TemporaryDirectory() as out:
            walls, cpus = time_cli(uri, Path(out))
        rows.append((n, walls, cpus, phase_times, built))
        print(
            f"{n:>5} runs: CLI median {statistics.median(walls):.2f} s wall, "
            f"{statistics.median(cpus):.2f} s CPU (walls {_list(walls)}); "
            f"store ready in {built:.1f} s",
            flush=True,
        )
        for label, seconds in phase_times.items():
            print(f"        {label:<45} {seconds:7.3f} s")

    lines = common.header(TITLE, common.command_line("bench_summarize.py", argv), info, start_load)
    lines += [
        "",
        "On a shared machine the CPU column is the work `summarize` itself does, which a "
        "dedicated core would turn into about as many wall seconds.",
    ]
    lines += [
        "",
        "Stores: SQLite, one experiment, a parent run and N trial runs in 4 groups; each trial "
        f"has {VALID_POINTS} validation points (valid/test accuracy and loss, epoch, wall time) "
        f"and train loss and lr every {TRAIN_EVERY} updates; 1 run in 50 failed or early-stopped.",
        "",
        "End to end: `sweeper summarize --experiment bench --tracking-uri sqlite:///... --out DIR` "
        "in a fresh process (tables, figures, report logged to the parent run); median of 3. "
        "Target: 1,000 runs in at most 10 s.",
        "",
        "| Trial runs | CLI wall, median (s) | CLI CPU user+sys, median (s) "
        "| wall of each run (s) |",
        "|---:|---:|---:|---|",
    ]
    for n, walls, cpus, _, _ in rows:
        lines.append(
            f"| {n:,} | {statistics.median(walls):.2f} | {statistics.median(cpus):.2f} "
            f"| {_list(walls)} |"
        )
    for n, walls, *_ in rows:
        if n == 1000:
            wall = statistics.median(walls)
            lines += [
                "",
                f"Verdict: 1,000 runs in {wall:.2f} s: target {common.verdict(wall, 10)}.",
            ]
    labels = list(rows[0][3]) if rows else []
    lines += [
        "",
        "In-process phases (s), one fresh process per store. `summarize()` reads histories "
        "with the read-only SQLite query on SQLite stores, the bulk API on other SQL stores "
        "and per-run `get_metric_history` on tracking servers.",
        "",
        "| Phase | " + " | ".join(f"{n:,} runs" for n, *_ in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(f"{r[3][label]:.3f}" for r in rows) + " |")
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if not args.no_doc:
        common.write_section(TITLE, text)
        print(f"updated {common.DOC.relative_to(common.ROOT)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--phases":
        for key, value in time_phases(sys.argv[2]).items():
            print(f"{key}\t{value:.6f}")
        sys.exit(0)
    sys.exit(main())
