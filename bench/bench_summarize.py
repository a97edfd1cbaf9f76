"""Benchmark `sweeper summarize` on stores of 12, 1,000 and 10,000 trial runs: a SQLite
file, and the same runs through `mlflow server` on SQLite and on PostgreSQL.

    python bench/bench_summarize.py                 # build (once, cached) and time
    python bench/bench_summarize.py --sizes 12 1000 # a subset
    python bench/bench_summarize.py --no-doc        # print only
    python bench/bench_summarize.py --no-server     # the file only
    python bench/bench_summarize.py --quick         # 12 runs only: checks the script

Each store holds one experiment with a parent run and N trial runs in 4 groups
(fairseq/hf × pretrained/random), logged the way the sweep engine logs them: 10
validation points each (valid/test accuracy and loss, epoch, wall time) and train loss
and learning rate every 25 updates; one run in 50 failed or early-stopped. Stores are
built with MLflow's client (log_batch) and cached under $TMPDIR/sweeper-bench-summarize/
(a store is reused only if its build completed).

Timed, each in a fresh process (median of 5; wall and CPU):

* `summarize --format json` once the report is logged: what a researcher re-running the
  summary pays (issue 18's targets: 12 runs <= 1 s, 1,000 <= 2 s, 10,000 <= 10 s);
* the same with `--out DIR` (tables and figures written);
* the first summary after the record changed (the parent run's digest tag is made
  stale before each run), which logs the report with its figures through MLflow;
* the floor: a process that only imports the SQLite reader and runs its queries
  (experiment, runs with tags/params/latest metrics, the histories a summary reads).

Through a server (bench/summarize_servers.py: the same runs, ids included, behind
`mlflow server` with its default 4 workers, as `sweeper cluster up` runs it), in the
same run: `summarize --format json` once the report is logged, against the file path;
the JSON of all three must be the same but for the tracking URI it names (checked; the
benchmark fails otherwise). In-process phases of each path are listed beside them.
Results are printed and written as the "sweeper summarize" section of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

from sweeper import record_names

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
        experiment_id,
        tags={record_names.TAG_ROLE: record_names.ROLE_SWEEP, record_names.TAG_SWEEP: EXPERIMENT},
    ).info.run_id
    for i in range(n):
        framework, init = GROUPS[i % len(GROUPS)]
        seed = i // len(GROUPS) + 1
        status = record_names.Status.FINISHED
        if i % 50 == 49:
            status = (
                record_names.Status.FAILED if i % 100 == 99 else record_names.Status.EARLY_STOPPED
            )
        tags = {
            MLFLOW_PARENT_RUN_ID: parent,
            record_names.TAG_ROLE: record_names.ROLE_TRIAL,
            record_names.TAG_SWEEP: EXPERIMENT,
            record_names.TAG_TRIAL_KEY: f"{i:016x}",
            record_names.TAG_GROUP: f"{framework}/{init}/full",
            record_names.TAG_SEED: str(seed),
            record_names.TAG_INIT: init,
            record_names.TAG_FRAMEWORK: framework,
            record_names.TAG_METHOD: "full",
            record_names.TAG_STAGE: "grid",
            record_names.TAG_STATUS: status,
            record_names.TAG_TRAINABLE_PARAMS: "22830594",
        }
        run_id = client.create_run(experiment_id, tags=tags, run_name=f"run-{i}").info.run_id
        finished = status == record_names.Status.FINISHED
        client.log_batch(run_id, metrics=_metrics(rng, init == "pretrained", finished))
        client.set_terminated(
            run_id, "FAILED" if status == record_names.Status.FAILED else "FINISHED"
        )
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
        out.append(Metric(record_names.METRIC_TRAIN_LOSS, rng.uniform(0.2, 0.7), now + step, step))
        out.append(Metric(record_names.METRIC_LR, 1e-5 * (1 - step / 2250), now + step, step))
        if step % VALID_EVERY == 0:
            progress = step / (VALID_EVERY * VALID_POINTS)
            valid = level - 10 * (1 - progress) + rng.gauss(0, 1.5)
            test = valid - 1 + rng.gauss(0, 1.5)
            out += [
                Metric(record_names.METRIC_VALID_ACC, round(valid, 1), now + step, step),
                Metric(record_names.METRIC_VALID_LOSS, rng.uniform(0.3, 0.7), now + step, step),
                Metric(record_names.METRIC_TEST_ACC, round(test, 1), now + step, step),
                Metric(record_names.METRIC_TEST_LOSS, rng.uniform(0.3, 0.7), now + step, step),
                Metric(record_names.METRIC_EPOCH, step / VALID_EVERY, now + step, step),
                Metric(record_names.METRIC_WALL_TIME, step * 0.05, now + step, step),
            ]
    if finished:
        valid = {m.step: m.value for m in out if m.key == record_names.METRIC_VALID_ACC}
        test = {m.step: m.value for m in out if m.key == record_names.METRIC_TEST_ACC}
        best = max(sorted(valid), key=lambda s: (valid[s], -s))
        last = max(valid)
        out += [
            Metric(record_names.METRIC_BEST_VALID_ACC, valid[best], now + last, last),
            Metric(record_names.METRIC_BEST_TEST_ACC, test[best], now + last, last),
            Metric(record_names.METRIC_BEST_STEP, float(best), now + last, last),
            Metric(record_names.METRIC_BEST_EPOCH, best / VALID_EVERY, now + last, last),
        ]
    return out


def time_command(command: list[str], repeats: int, before=None) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + sys) seconds of each run of `command` in a fresh process;
    `before()` runs untimed ahead of each.

    CPU time is reported beside wall time because the dev machines are shared: when
    other jobs hold the cores, wall time grows while CPU time barely moves.
    """
    walls, cpus = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime)
    return walls, cpus


def summarize_command(uri: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "sweeper.cli.main", "summarize", "--experiment", EXPERIMENT,
        "--tracking-uri", uri, "--format", "json", *extra,
    ]  # fmt: skip


FLOOR = """
import sys
from sweeper.summarize.mlflow_reader import records_of
from sweeper.summarize.select import HISTORY_KEYS
from sweeper.summarize.sqlite_store import open_sqlite
store = open_sqlite(sys.argv[1])
experiment_id, _ = store.experiment(sys.argv[2])
runs = records_of(store.runs(experiment_id))
store.history_rows([r.run_id for r in runs if "best_step" not in r.latest], HISTORY_KEYS)
"""


def stale_digest(uri: str) -> None:
    """Make the parent run's report digest stale, so the next summary logs again."""
    import sqlite3

    from sweeper.tracking.store import sqlite_path

    with sqlite3.connect(sqlite_path(uri)) as db:
        db.execute(
            "UPDATE tags SET value = 'stale' WHERE key = ?", (record_names.TAG_REPORT_DIGEST,)
        )


def time_cases(uri: str, out_dir: Path, repeats: int) -> dict[str, tuple[list[float], list[float]]]:
    """Every end-to-end case of the module docstring, in a fresh process each time."""
    subprocess.run(summarize_command(uri), check=True, capture_output=True)  # log it once
    return {
        "json, report unchanged": time_command(summarize_command(uri), repeats),
        "json + --out (tables, figures)": time_command(
            summarize_command(uri, "--out", str(out_dir)), repeats
        ),
        "json, record changed (logs report + figures)": time_command(
            summarize_command(uri), max(3, repeats // 2), before=lambda: stale_digest(uri)
        ),
        "floor: SQLite reader's queries only": time_command(
            [sys.executable, "-c", FLOOR, uri, EXPERIMENT], repeats
        ),
    }


def time_phases(uri: str) -> dict[str, float]:
    """In-process phases of the path `open_source` picks for `uri` (one process each)."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    from sweeper.summarize import SummaryRequest, summarize
    from sweeper.summarize.report import digest
    from sweeper.summarize.select import HISTORY_KEYS, recorded_checkpoint, screen
    from sweeper.summarize.source import open_source

    timings["imports"] = time.perf_counter() - start
    start = time.perf_counter()
    source = open_source(uri)
    experiment_id, _ = source.experiment(EXPERIMENT)
    timings["open the store, find the experiment"] = time.perf_counter() - start
    start = time.perf_counter()
    runs = source.runs(experiment_id)
    timings["runs: tags, params, latest metrics"] = time.perf_counter() - start
    start = time.perf_counter()
    candidates, _ = screen([r for r in runs if r.role == record_names.ROLE_TRIAL])
    unread = [r.run_id for r in candidates if recorded_checkpoint(r) is None]
    source.histories(unread, HISTORY_KEYS)
    timings["histories of runs without best_* metrics"] = time.perf_counter() - start
    start = time.perf_counter()
    summary = summarize(SummaryRequest(EXPERIMENT, uri))
    timings["summarize() total (read + select + stats)"] = time.perf_counter() - start
    start = time.perf_counter()
    digest(summary)
    timings["JSON + digest"] = time.perf_counter() - start
    return timings


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


SIZES = [12, 1000, 10000]
TARGETS = {12: 1.0, 1000: 2.0, 10000: 10.0}
"""Issue 18: seconds of wall time for `summarize --format json` at each store size."""
SERVER_RATIO = {1000: 2.5}
"""Issue 36: through a server on PostgreSQL, at most this many times the file's time."""
SERVER_SECONDS = {10000: 15.0}
"""Issue 36: through a server on PostgreSQL, at most this many seconds."""
QUICK_SIZES = [12]
SERVERS = ("server on SQLite", "server on PostgreSQL")
UNCHANGED = "json, report unchanged"


def same_json(uris: dict[str, str]) -> None:
    """The summaries of every store are the same JSON but for the URI each names."""
    found = {}
    for label, uri in uris.items():
        done = subprocess.run(summarize_command(uri), check=True, capture_output=True)
        found[label] = json.loads(done.stdout)
        if found[label].pop("tracking_uri") != uri:
            raise SystemExit(f"{label}: the summary names another tracking URI")
    first, *others = found
    for label in others:
        if found[label] != found[first]:
            raise SystemExit(f"the summary through the {label} differs from the {first}'s")


def time_servers(n: int, sqlite_file: Path, pg, work: Path, file_uri: str, repeats: int) -> tuple:
    """`json, report unchanged` through each server, the servers' CPU seconds per
    summary (`mlflow server` and its workers; PostgreSQL's backends beside), and the
    in-process phases."""
    import summarize_servers

    database = summarize_servers.postgres_store(pg, sqlite_file, f"n{n}")
    cases, server_cpu, phases = {}, {}, {}
    with contextlib.ExitStack() as stack:
        servers = {
            SERVERS[0]: stack.enter_context(
                summarize_servers.sqlite_server(sqlite_file, work / f"sqlite-{n}")
            ),
            SERVERS[1]: stack.enter_context(
                summarize_servers.postgres_server_uri(database, work / f"pg-{n}")
            ),
        }
        uris = {label: uri for label, (uri, _) in servers.items()}
        for uri in uris.values():  # log the report once through each: later runs read only
            subprocess.run(summarize_command(uri), check=True, capture_output=True)
        same_json({"file": file_uri, **uris})
        for label, (uri, group) in servers.items():
            groups = [group] + ([pg.pid] if label == SERVERS[1] else [])
            before = [summarize_servers.tree_cpu(g) for g in groups]
            cases[label] = time_command(summarize_command(uri), repeats)
            after = [summarize_servers.tree_cpu(g) for g in groups]
            server_cpu[label] = [(b - a) / repeats for a, b in zip(before, after, strict=True)]
            phases[label] = run_phases(uri)
    return cases, server_cpu, phases


def run_phases(uri: str) -> dict[str, float]:
    found = subprocess.run(
        [sys.executable, __file__, "--phases", uri], check=True, capture_output=True, text=True
    ).stdout
    pairs = (line.rsplit("\t", 1) for line in found.splitlines() if "\t" in line)
    return {key: float(value) for key, value in pairs}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", help=f"default {SIZES}; --quick: 12")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "sweeper-bench-summarize"
    )
    parser.add_argument(
        "--no-server", action="store_true", help="time the SQLite file only (no servers)"
    )
    common.add_common_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    info = common.machine()
    start_load = common.load_average()
    repeats = 3 if args.quick else 5
    rows = []
    with contextlib.ExitStack() as stack:
        pg = None
        if not args.no_server:
            import summarize_servers

            pg = stack.enter_context(summarize_servers.postgres(args.cache / CACHE_VERSION))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for n in args.sizes:
            folder = args.cache / CACHE_VERSION / f"n{n}"
            start = time.perf_counter()
            uri = build_store(folder, n)
            built = time.perf_counter() - start
            phase_times = {"file": run_phases(uri)}
            with tempfile.TemporaryDirectory() as out:
                cases = time_cases(uri, Path(out), repeats)
            server_cases, server_cpu = {}, {}
            if pg is not None:
                server_cases, server_cpu, server_phases = time_servers(
                    n, folder / "mlflow.db", pg, work, uri, repeats
                )
                phase_times.update(server_phases)
            rows.append((n, cases, phase_times, server_cases, server_cpu))
            print(f"{n:>6} runs (store ready in {built:.1f} s):", flush=True)
            for label, (walls, cpus) in [*cases.items(), *server_cases.items()]:
                extra = f"  server CPU {_list(server_cpu[label])}" if label in server_cpu else ""
                print(f"        {label:<48} {statistics.median(walls):6.2f} s wall "
                      f"{statistics.median(cpus):6.2f} s CPU ({_list(walls)}){extra}")  # fmt: skip
            for store, times in phase_times.items():
                for label, seconds in times.items():
                    print(f"        {store:<20} {label:<42} {seconds:7.3f} s")

    text = "\n".join(report_lines(rows, common.command_line("bench_summarize.py", argv), info,
                                   start_load)) + "\n"  # fmt: skip
    common.publish(TITLE, text, not args.no_doc)
    return 0


def report_lines(rows: list, command: str, info: dict[str, str], start_load: str) -> list[str]:
    lines = common.header(TITLE, command, info, start_load)
    labels = list(rows[0][1]) if rows else []
    lines += [
        "",
        "Stores: SQLite, one experiment, a parent run and N trial runs in 4 groups; each trial "
        f"has {VALID_POINTS} validation points (valid/test accuracy and loss, epoch, wall time) "
        f"and train loss and lr every {TRAIN_EVERY} updates; 1 run in 50 failed or early-stopped; "
        "a finished run carries its best-checkpoint metrics (`best_*`), as the engine logs "
        "them, so a summary reads the histories only of runs without them (the early-stopped "
        "ones) and, for figures, the validation curves.",
        "",
        "Each cell: median wall seconds of fresh `sweeper summarize --experiment bench "
        "--tracking-uri sqlite:///... --format json` processes (CPU user+sys in brackets). A "
        "SQLite store is read with SQL (no MLflow import); a report identical to the one the "
        "parent run holds is not logged again. The CPU figure is the work itself, which on "
        "a shared machine a free core turns into about as many wall seconds.",
        "",
        *common.table(
            ["Case", *(f"{n:,} runs" for n, *_ in rows)],
            [[label, *(_cell(r[1][label]) for r in rows)] for label in labels],
        ),
        "",
    ]
    for n, cases, *_ in rows:
        if n in TARGETS:
            wall = statistics.median(cases[UNCHANGED][0])
            lines.append(
                f"- {n:,} runs in {wall:.2f} s (target <= {TARGETS[n]:g} s): "
                f"{common.verdict(wall, TARGETS[n])}"
            )
    served = [r for r in rows if r[3]]
    if served:
        lines += server_lines(served)
    phases = list(rows[0][2]["file"]) if rows else []
    lines += [
        "",
        "In-process phases (s), one fresh process per store (the path `open_source` picks, "
        "its runs and histories, then `summarize()` again whole):",
        "",
        *common.table(
            ["Runs", "store", *phases],
            [
                [f"{n:,}", store, *(f"{times[label]:.3f}" for label in phases)]
                for n, _, by_store, *_ in rows
                for store, times in by_store.items()
            ],
            "ll" + "r" * len(phases),
        ),
    ]
    return lines


def server_lines(rows: list) -> list[str]:
    """The server columns: the same summary through `mlflow server`, same run."""
    lines = [
        "",
        "Through a tracking server: the same runs (copied, ids included) behind `mlflow "
        "server` (4 workers, its default and `sweeper cluster up`'s) on a SQLite file and on "
        "PostgreSQL, both on this machine; `sweeper summarize --tracking-uri http://... "
        "--format json` with the report already logged, timed in the same run as the file "
        "column. The CPU figure in brackets is the summarising process's only; the servers' "
        "own CPU seconds per summary (all of `mlflow server`'s processes; for PostgreSQL, "
        "plus the database's) are the last columns: on this machine's 2 cores, wall time "
        "cannot fall below about half of the servers' and the client's CPU together. The "
        "JSON of all three was checked to be the same but for the tracking URI.",
        "",
        *common.table(
            [
                *("Runs", "file", *SERVERS, "PostgreSQL / file", "server CPU: SQLite"),
                "server CPU: PostgreSQL (mlflow + postgres)",
            ],
            [
                [
                    f"{n:,}",
                    _cell(cases[UNCHANGED]),
                    *(_cell(server[label]) for label in SERVERS),
                    f"{_ratio(server[SERVERS[1]], cases[UNCHANGED]):.1f}x",
                    f"{cpu[SERVERS[0]][0]:.2f}",
                    " + ".join(f"{c:.2f}" for c in cpu[SERVERS[1]]),
                ]
                for n, cases, _, server, cpu in rows
            ],
        ),
    ]
    notes = []
    for n, cases, _, server, _ in rows:
        wall = statistics.median(server[SERVERS[1]][0])
        if n in SERVER_RATIO:
            ratio = _ratio(server[SERVERS[1]], cases[UNCHANGED])
            notes.append(
                f"- {n:,} runs through the server on PostgreSQL in {wall:.2f} s, {ratio:.1f}x "
                f"the file (target <= {SERVER_RATIO[n]:g}x): "
                f"{common.verdict(ratio, SERVER_RATIO[n])}"
            )
        if n in SERVER_SECONDS:
            notes.append(
                f"- {n:,} runs through the server on PostgreSQL in {wall:.2f} s (target <= "
                f"{SERVER_SECONDS[n]:g} s): {common.verdict(wall, SERVER_SECONDS[n])}"
            )
    return lines + (["", *notes] if notes else [])


def _cell(timed: tuple[list[float], list[float]]) -> str:
    walls, cpus = timed
    return f"{statistics.median(walls):.2f} ({statistics.median(cpus):.2f})"


def _ratio(timed: tuple[list[float], list[float]], base: tuple[list[float], list[float]]) -> float:
    return common.ratio(statistics.median(timed[0]), statistics.median(base[0]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--phases":
        for key, value in time_phases(sys.argv[2]).items():
            print(f"{key}\t{value:.6f}")
        sys.exit(0)
    sys.exit(main())
