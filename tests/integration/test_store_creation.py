"""New SQLite stores: several drivers at once (issue 17, item 3), the cached schema (18).

Each process calls `sweeper.tracking.server.open_store` for the same spec on a fresh
output_dir, released together from a barrier file, so MLflow's schema creation and
migration (no cached schema) or the copy of the cached one race for real. Every process
must get the store and the one experiment id, with no traceback.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.reliability import record
from tests.support.sweeps import sweeper_env

pytestmark = pytest.mark.integration

DRIVERS = 3
OPEN = """
import sys, time
from pathlib import Path
from sweeper.spec.load import load_spec
from sweeper.tracking.server import open_store
from sweeper.tracking.store import spec_store_uri

spec = load_spec(Path(sys.argv[1]))
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.005)
client, experiment_id = open_store(spec, spec_store_uri(spec))
print("experiment", experiment_id, len(client.search_experiments()))
"""


def write_spec(folder: Path, output_dir: str = "out") -> Path:
    spec = folder / f"{output_dir}.yaml"
    spec.write_text(
        f"name: race\noutput_dir: {output_dir}\n"
        "data: {source: generated, dir: corpus, generate: {seed: 0}}\n"
        "model: {sentencepiece: corpus/sp.model, dictionary: corpus/dict.txt,\n"
        "        arch: {layers: 1, embed_dim: 16, ffn_dim: 32, heads: 2, max_positions: 32}}\n"
        "grid: {init: [random]}\n",
        encoding="utf-8",
    )
    return spec


def open_in_subprocess(spec: Path, cache: Path) -> str:
    go = spec.parent / "go-now"
    go.touch()
    done = subprocess.run(
        [sys.executable, "-c", OPEN, str(spec), str(go)],
        capture_output=True,
        text=True,
        env={**sweeper_env(), "SWEEPER_CACHE": str(cache)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize("cached_schema", [False, True], ids=["migrating", "from-cache"])
def test_concurrent_first_use_gives_one_store(tmp_path, cached_schema):
    cache = tmp_path / "cache"
    if cached_schema:  # a first store leaves the schema in the cache
        open_in_subprocess(write_spec(tmp_path, "first"), cache)
        assert any((cache / "mlflow-schema").glob("*.db"))
    spec = write_spec(tmp_path)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, str(spec), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**sweeper_env(), "SWEEPER_CACHE": str(cache)},
        )
        for _ in range(DRIVERS)
    ]
    time.sleep(8)  # every process has imported mlflow and waits at the barrier
    go.touch()
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = [code for code, _, _ in results]
    outputs = sorted(out.strip() for _, out, _ in results)
    tracebacks = sum("Traceback" in err for _, _, err in results)
    how = "copied from the cached schema" if cached_schema else "MLflow creates its schema"
    record(
        f"store: concurrent first use of one SQLite file ({how})",
        f"{DRIVERS} processes open the same new store at once ({how})",
        f"exit codes {codes}; experiment ids {sorted({o.split()[1] for o in outputs if o})}; "
        f"tracebacks {tracebacks}",
        passed=codes == [0] * DRIVERS and tracebacks == 0,
    )
    assert codes == [0] * DRIVERS, [err[-2000:] for _, _, err in results]
    assert tracebacks == 0
    assert len(set(outputs)) == 1 and outputs[0].startswith("experiment ")
    assert Path(tmp_path / "out" / "mlflow.db").is_file()


def test_a_new_store_starts_as_a_copy_of_the_cached_schema(tmp_path):
    """The first new store keeps its empty schema in $SWEEPER_CACHE; the next new store
    is a copy of it (a marker table put in the template shows up in it), holds the same
    tables and gets the same experiment id, and MLflow writes to it as to any store."""
    import sqlite3

    from mlflow import MlflowClient

    cache = tmp_path / "cache"
    first = open_in_subprocess(write_spec(tmp_path, "first"), cache)
    (template,) = (cache / "mlflow-schema").glob("*.db")
    with sqlite3.connect(template) as db:
        assert db.execute("SELECT name FROM experiments").fetchall() == [("Default",)]
        db.execute("CREATE TABLE copied_from_template (x)")
    second = open_in_subprocess(write_spec(tmp_path, "second"), cache)
    assert first == second == "experiment 1 2"

    def tables(path: Path) -> set[str]:
        with sqlite3.connect(path) as db:
            return {row[0] for row in db.execute("SELECT name FROM sqlite_master")}

    made, copied = tmp_path / "first" / "mlflow.db", tmp_path / "second" / "mlflow.db"
    assert tables(copied) == tables(made) | {"copied_from_template"}
    client = MlflowClient(f"sqlite:///{copied}")
    run = client.create_run("1")
    client.log_metric(run.info.run_id, "valid_accuracy", 71.5, step=3)
    assert client.get_run(run.info.run_id).data.metrics == {"valid_accuracy": 71.5}


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_drivers_started_together_on_a_new_tracking_server(tmp_path, tmp_path_factory):
    """Three `sweeper run SPEC` started at once against a new, empty `mlflow server`:
    one experiment and one sweep; one driver runs it, each other one exits 2 naming the
    driver that holds the sweep; no traceback anywhere."""
    from mlflow import MlflowClient

    from tests.support.cluster import mlflow_server
    from tests.support.faults import server_root
    from tests.support.sweeps import kill_group, new_sweep, roles_in, sweeper_command

    spec, _ = new_sweep(
        tmp_path, tmp_path_factory, "serverrace", grid={"seed": [1, 2]}, max_concurrent=1
    )
    with mlflow_server(server_root(tmp_path, tmp_path_factory)) as server:
        procs = [
            subprocess.Popen(
                sweeper_command("run", spec, "--tracking-uri", server.uri),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=sweeper_env({"*": {"sleep_per_step": 0.5}}),  # 10 s a trial: all three meet
                start_new_session=True,
            )
            for _ in range(DRIVERS)
        ]
        try:
            results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        finally:
            for proc in procs:
                kill_group(proc.pid)
        client = MlflowClient(server.uri)
        experiments = [e.name for e in client.search_experiments()]
        parents, trials = roles_in(client, "serverrace")
    codes = sorted(code for code, _, _ in results)
    tracebacks = sum("Traceback" in out + err for _, out, err in results)
    refused = [err for code, _, err in results if code == 2]
    runner = next(p.pid for p, (code, _, _) in zip(procs, results, strict=True) if code == 0)
    named = ["is being run by another driver" in err and f"pid {runner} " in err for err in refused]
    record(
        "store: drivers started together on a new tracking server",
        f"{DRIVERS} `sweeper run SPEC` processes started at once against a fresh `mlflow "
        "server` (empty database), 2 dummy trials",
        f"exit codes {codes}; the refused ones name pid {runner}: "
        f"{sum(named)}/{len(refused)}; experiments "
        f"{sorted(experiments)}; {len(parents)} sweep run, {len(trials)} trial runs; "
        f"tracebacks {tracebacks}",
        passed=codes == [0, 2, 2] and tracebacks == 0 and all(named),
    )
    assert codes == [0, 2, 2], [err[-1500:] for _, _, err in results]
    assert tracebacks == 0
    assert all(named), [err[-800:] for err in refused]  # the driver that runs the sweep
    assert experiments.count("serverrace") == 1
    assert len(parents) == 1 and sorted(t.info.status for t in trials) == ["FINISHED"] * 2
