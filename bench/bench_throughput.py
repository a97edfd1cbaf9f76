"""Engine throughput: trials per minute when the trainer does no work.

    python bench/bench_throughput.py                  # 40 trials, 2 at a time, 3 stores
    python bench/bench_throughput.py --quick          # 8 trials: checks the script
    python bench/bench_throughput.py --baseline REV   # also REV's code, same stores

A sweep of the test-only `dummy` trainer (a subprocess that reads its inputs, writes
20 steps of metrics and a checkpoint per epoch, and sleeps 0 s a step), so what is
timed is sweeper's own per-trial cost: Ray Tune scheduling the trial, the trainable
starting the trainer process, parsing its events, logging them to MLflow through the
recorder, syncing and closing the run. Three stores: the local SQLite file, a loopback
`mlflow server` on a SQLite file, and the same server on PostgreSQL (a cluster's store:
tests/support/postgres.py starts one from Debian's binaries). `--baseline REV` runs
the same sweeps with REV's `src/` first on PYTHONPATH, in the same run, so before and
after share the machine's load. Then, untimed, one more server sweep per code through
a counting loopback proxy (tests/support/proxy.py, no delay): the HTTP requests per
trial, by endpoint (the sweep's own: staging, summary and report included).

Reported from the trial runs' own start and end times in MLflow: the span from the
first start to the last end, trials per minute over it, and engine seconds per trial
(span x concurrency / trials: the time one slot spends per trial). A trial's start is
its first logged point (its run is created, with every other, before Ray starts); its
end is the end time its run records, when the driver learned it ended. How far the
record lags behind shows in "Recorded (s)": from the first start to the sweep run's
end, which the driver writes once every trial's writes reached the store (after Ray
has shut down: that part is the same for every store). The soak in `make reliability` measures the
same on 200 trials with 3 s of sleep each; its load scenario, 200 trials 8 at once on a
two-node cluster and PostgreSQL, the server's points per second.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import common
import yaml

from sweeper import record_names
from tests.support.cluster import mlflow_server
from tests.support.postgres import postgres_server
from tests.support.proxy import slow_proxy
from tests.support.sweeps import base_spec

TITLE = "Engine throughput"
TRIALS, QUICK_TRIALS = 40, 8
CONCURRENCY = 2
PLUGIN = "tests.support.dummy_trainer:register"
STORES = ("sqlite", "server", "server-pg")


def write_sweep(work: Path, name: str, trials: int) -> Path:
    corpus = work / "corpus"
    raw = base_spec(corpus, name, work / name)
    raw["grid"]["seed"] = list(range(1, trials + 1))
    raw["max_concurrent"] = CONCURRENCY
    raw["retries"] = 0
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def run_sweep(
    spec: Path, uri: str | None, env: dict[str, str]
) -> tuple[float, list[tuple[float, float]], float]:
    """Run the sweep; (driver wall seconds, [(start, end) of each trial run], the
    sweep run's end)."""
    from mlflow import MlflowClient

    from sweeper.spec.load import load_spec
    from sweeper.tracking import experiment_name, spec_store_uri

    extra = ["--tracking-uri", uri] if uri else []
    # from the sweep's folder: `python -m` puts the working folder first on sys.path,
    # which must not be a checkout whose tests/support would shadow the code's own
    timed = common.run_timed(common.sweeper_command("run", spec, *extra), env=env, cwd=spec.parent)
    loaded = load_spec(spec)
    client = MlflowClient(uri or spec_store_uri(loaded))
    experiment = client.get_experiment_by_name(experiment_name(loaded))
    runs = client.search_runs([experiment.experiment_id], "tags.`sweeper.role` = 'trial'")
    spans = []
    for run in runs:  # runs are created before Ray starts: a trial starts at its first point
        first = min(
            m.timestamp
            for m in client.get_metric_history(run.info.run_id, record_names.METRIC_TRAIN_LOSS)
        )
        spans.append((first / 1000, run.info.end_time / 1000))
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`sweeper.role` = 'sweep'")
    return timed.wall, spans, parent.info.end_time / 1000


def measure(work: Path, trials: int, store: str, code: str, env: dict[str, str]) -> dict[str, Any]:
    name = f"throughput-{store}-{code.split()[0]}"
    spec = write_sweep(work, name, trials)
    if store == "sqlite":
        wall, spans, recorded = run_sweep(spec, None, env)
    elif store == "server":
        with mlflow_server(work / f"server-{name}") as server:
            wall, spans, recorded = run_sweep(spec, server.uri, env)
    else:
        with (
            postgres_server() as postgres,
            mlflow_server(work / f"server-{name}", backend_store_uri=postgres.uri) as server,
        ):
            wall, spans, recorded = run_sweep(spec, server.uri, env)
    assert len(spans) == trials, f"{len(spans)} trial runs, expected {trials}"
    first = min(start for start, _ in spans)
    span = max(end for _, end in spans) - first
    durations = [end - start for start, end in spans]
    return {
        "store": store,
        "code": code,
        "trials": trials,
        "wall": wall,
        "span": span,
        "per_minute": trials / span * 60,
        "engine_s": span * CONCURRENCY / trials,
        "run_median": statistics.median(durations),
        "recorded": recorded - first,
    }


def count_requests(work: Path, trials: int, code: str, env: dict[str, str]) -> Counter[str]:
    """Requests per endpoint of one server sweep through a counting proxy (untimed);
    ids and artifact file names folded, so one trial's requests add up by kind."""
    name = f"requests-{code.split()[0]}"
    spec = write_sweep(work, name, trials)
    with mlflow_server(work / f"server-{name}") as server, slow_proxy(server.uri, 0) as proxy:
        common.run_timed(
            common.sweeper_command("run", spec, "--tracking-uri", proxy.uri),
            env=env,
            cwd=spec.parent,
        )
    kinds: Counter[str] = Counter()
    for path, n in proxy.paths.items():
        path = re.sub(r"/artifacts/\d+/.*", "/artifacts/<exp>/... (files)", path)
        kinds[re.sub(r"m-[0-9a-f]{32}", "<model>", path)] += n
    return kinds


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    parser.add_argument("--baseline", metavar="REV", help="also REV's code, same stores")
    args = parser.parse_args(argv)
    # This process reads the spec; children (the CLI, Ray workers) inherit both.
    os.environ["SWEEPER_PLUGINS"] = PLUGIN
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(common.ROOT), os.environ.get("PYTHONPATH")])
    )
    trials = QUICK_TRIALS if args.quick else TRIALS
    info, start_load = common.machine(), common.load_average()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sweeper-bench-throughput-") as tmp:
        codes = {"this checkout": common.clean_env()}
        if args.baseline:  # its src/ first, then its own dummy plugin (tests/support)
            src = common.code_of(args.baseline, Path(tmp) / "baseline-code", "tests/support")
            path = os.pathsep.join([str(src), str(src.parent)])
            codes = {args.baseline: {**common.clean_env(), "PYTHONPATH": path}, **codes}
        for store in STORES:  # each store's before and after next to each other in time
            for code, env in codes.items():
                row = measure(Path(tmp), trials, store, code, env)
                rows.append(row)
                print(
                    f"{store} ({code}): {row['per_minute']:.1f} trials/min, "
                    f"{row['engine_s']:.2f} s per trial slot, driver wall {row['wall']:.1f} s, "
                    f"load {common.load_average()}",
                    flush=True,
                )
        requests = {
            code: count_requests(Path(tmp), trials, code, env) for code, env in codes.items()
        }
    lines = common.header(TITLE, common.command_line("bench_throughput.py", argv), info, start_load)
    lines += [
        "",
        f"{trials} trials of the dummy trainer (20 steps, no sleep: no training work), "
        f"{CONCURRENCY} at a time, `resources.cpu: 1`; times from the trial runs' start and "
        "end in MLflow (start: first logged point). Engine seconds per trial = span x "
        "concurrency / trials.",
        "",
        *common.table(
            [
                "Store",
                "Code",
                "Trials/min",
                "Engine s per trial",
                "Median run (s)",
                "Span (s)",
                "Recorded (s)",
                "Trials/min until recorded",
                "Driver wall (s)",
            ],
            [
                [
                    r["store"],
                    r["code"],
                    f"{r['per_minute']:.1f}",
                    f"{r['engine_s']:.2f}",
                    f"{r['run_median']:.2f}",
                    f"{r['span']:.1f}",
                    f"{r['recorded']:.1f}",
                    f"{r['trials'] / r['recorded'] * 60:.1f}",
                    f"{r['wall']:.1f}",
                ]
                for r in rows
            ],
        ),
        "",
        f"HTTP requests per trial through the server (all of the sweep's, over {trials} "
        "trials; a counting proxy, untimed):",
        "",
        *common.table(
            ["Request", *requests],
            [
                [kind, *(f"{requests[code][kind] / trials:.2f}" for code in requests)]
                for kind in sorted(set().union(*requests.values()))
            ]
            + [["all", *(f"{sum(c.values()) / trials:.2f}" for c in requests.values())]],
        ),
    ]
    text = "\n".join(lines) + "\n"
    common.publish(TITLE, text, not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
