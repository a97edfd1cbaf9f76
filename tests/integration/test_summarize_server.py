"""`sweeper summarize` through a real `mlflow server` on a real PostgreSQL database.

The REST reader (`sweeper.summarize.http_store`) must give exactly what MLflow's client
reads from the same database directly: the same run records in the same order, every
history point, and so the same summary. The histories are sized to hit the server's
limits: eleven runs whose points of one metric together pass the 25,000 points one
`get-history-bulk` answer holds (the server drops the rest silently: asserted below, so
a reader that trusted one answer would fail here), and one run that fills an answer
alone. Search pages are made small, so that the runs come in more pages than requests
in flight.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.summarize import SummarizeError, SummaryRequest, http_store, summarize
from sweeper.summarize.http_store import BULK_POINTS, BULK_RUNS, HttpStore, plain_call
from sweeper.summarize.mlflow_reader import load_histories
from sweeper.summarize.select import HISTORY_KEYS
from sweeper.summarize.source import MlflowSource, StoreSource, open_source
from tests.integration.test_summarize_store import (
    T0,
    Trial,
    _comparable,
    edge_trials,
    lab_trials,
    write_trial,
)
from tests.support.cluster import mlflow_server

pytestmark = pytest.mark.slow  # a server, a database and 50,000 history points: ~1-2 min

CUT_RUNS = 11
CUT_POINTS = 2_400  # 11 x 2,400 = 26,400 points of valid_accuracy: past one answer
ALONE_POINTS = BULK_POINTS + 500  # one run's valid_accuracy: fills an answer by itself
SMALL_RUNS = 30
SEARCH_PAGE = 4  # 43 runs in 11 pages: more pages than requests in flight


def write_experiment(client, name: str, trials: list[Trial], artifacts: Path) -> dict:
    """An experiment with a parent run and the given trials (as the SQLite tests write
    them), its artifacts under `artifacts`."""
    experiment_id = client.create_experiment(name, artifact_location=(artifacts / name).as_uri())
    parent = client.create_run(
        experiment_id, start_time=T0, tags={record_names.TAG_ROLE: record_names.ROLE_SWEEP}
    ).info.run_id
    ids = [write_trial(client, experiment_id, parent, t, i + 1) for i, t in enumerate(trials)]
    client.set_terminated(parent, "FINISHED")
    return {"experiment_id": experiment_id, "parent": parent, "runs": ids}


def long_history(client, run_id: str, points: int, seed: int) -> None:
    """`points` valid_accuracy values (a NaN, a -infinity and a re-logged step among
    them; the best at step 1,200) and a test accuracy and epoch every 100 steps, in
    batches of 1,000."""
    from mlflow.entities import Metric

    metrics = []
    for step in range(1, points + 1):
        value = (step * 7919 + seed * 104729) % 9_000 / 100
        if step == 1200:
            value = 95.0 - seed / 10
        elif step == 17:
            value = math.nan
        elif step == 18:
            value = -math.inf
        metrics.append(Metric(record_names.METRIC_VALID_ACC, value, T0 + step, step))
        if step % 100 == 0:
            metrics.append(Metric(record_names.METRIC_TEST_ACC, value - 1, T0 + step, step))
            metrics.append(Metric(record_names.METRIC_EPOCH, step / 100, T0 + step, step))
    metrics.append(Metric(record_names.METRIC_VALID_ACC, 42.0, T0 + points + 1, 100))
    for start in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[start : start + 1000])


def big_trials() -> list[Trial]:
    cut = [Trial("hf", "pretrained", seed, [], [], sweep="big") for seed in range(1, CUT_RUNS + 2)]
    small = [
        Trial("fairseq", "random", seed, [(225, 60.0 + seed / 10)], [(225, 61.0)], sweep="big")
        for seed in range(1, SMALL_RUNS + 1)
    ]
    return cut + small


@pytest.fixture(scope="module")
def server(postgres, tmp_path_factory):
    """The experiments written straight into a PostgreSQL database, and `mlflow server`
    on that database (two workers, so that requests in flight really overlap)."""
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("summarize-server")
    database = postgres.create_database("summarize_server")
    client = MlflowClient(database)
    made = {
        "lab": write_experiment(client, "lab", lab_trials(), root / "artifacts"),
        "edge": write_experiment(client, "edge", edge_trials(), root / "artifacts"),
        "big": write_experiment(client, "big", big_trials(), root / "artifacts"),
    }
    long_runs = made["big"]["runs"][: CUT_RUNS + 1]
    for seed, run_id in enumerate(long_runs[:CUT_RUNS]):
        long_history(client, run_id, CUT_POINTS, seed)
    long_history(client, long_runs[CUT_RUNS], ALONE_POINTS, CUT_RUNS)
    with mlflow_server(root / "server", backend_store_uri=database, workers=2) as running:
        yield {"uri": running.uri, "database": database, "client": client, **made}


@pytest.fixture
def small_pages(monkeypatch):
    monkeypatch.setattr(http_store, "SEARCH_PAGE", SEARCH_PAGE)


def comparable(history: dict) -> dict:
    """Histories with NaN made comparable (NaN != NaN)."""
    return {
        run_id: {
            key: [(p.step, p.timestamp, "nan" if math.isnan(p.value) else p.value) for p in points]
            for key, points in metrics.items()
        }
        for run_id, metrics in history.items()
    }


def test_one_bulk_answer_is_cut_at_the_servers_limit(server):
    """The premise: the eleven runs' valid_accuracy does not fit one answer, which
    comes back full, without a word about the points left out."""
    call = plain_call(server["uri"])
    cut_runs = server["big"]["runs"][:CUT_RUNS]
    assert len(cut_runs) <= BULK_RUNS and CUT_RUNS * CUT_POINTS > BULK_POINTS
    query = [("run_id", r) for r in cut_runs] + [("metric_key", record_names.METRIC_VALID_ACC)]
    answer = call("GET", "/ajax-api/2.0/mlflow/metrics/get-history-bulk", query, None)
    assert len(answer["metrics"]) == BULK_POINTS
    assert set(answer) == {"metrics"}


def test_histories_through_the_server_are_exact(server):
    """Every point of the long histories: the REST reader, MLflow's HTTP client on the
    same endpoint (`server`), and the database read directly by MLflow's SQL store
    (`bulk`) agree; so does one request per run and metric (`per_run`) for the run
    that fills an answer alone."""
    from mlflow import MlflowClient

    run_ids = server["big"]["runs"]
    store = HttpStore(server["uri"], plain_call(server["uri"]))
    from sweeper.summarize.mlflow_reader import as_history

    rest = as_history(store.history_rows(run_ids, HISTORY_KEYS), run_ids)
    direct = load_histories(server["client"], run_ids, HISTORY_KEYS, "bulk")
    through = load_histories(MlflowClient(server["uri"]), run_ids, HISTORY_KEYS, "server")
    assert comparable(rest) == comparable(direct) == comparable(through)
    valid = record_names.METRIC_VALID_ACC
    counts = [len(rest[r][valid]) for r in run_ids[: CUT_RUNS + 1]]
    assert counts == [CUT_POINTS + 1] * CUT_RUNS + [ALONE_POINTS + 1]
    alone = run_ids[CUT_RUNS : CUT_RUNS + 1]
    per_run = load_histories(MlflowClient(server["uri"]), alone, [valid], "per_run")
    assert comparable(per_run) == comparable({alone[0]: {valid: rest[alone[0]][valid]}})


@pytest.mark.parametrize("name", ["lab", "edge", "big"])
def test_records_and_summary_through_the_server_match_the_database(server, small_pages, name):
    if name == "big":  # the premise: more pages than requests in flight
        assert len(server["big"]["runs"]) + 1 > SEARCH_PAGE * http_store.THREADS
    """Run records (tags, params, latest metrics, order) read over REST in small pages
    equal MLflow's client on the database; so do the summaries, and so do the ones
    through MLflow's own client on the server."""
    from mlflow import MlflowClient

    fast = open_source(server["uri"])
    assert isinstance(fast, StoreSource) and isinstance(fast.store, HttpStore)
    direct = MlflowSource(server["client"])
    experiment_id, _ = direct.experiment(name)
    assert fast.experiment(name) == direct.experiment(name)
    assert _comparable(fast.runs(experiment_id)) == _comparable(direct.runs(experiment_id))
    parent = server[name]["parent"]
    assert fast.tags(parent) == direct.tags(parent)
    reference = replace(
        summarize(SummaryRequest(name, server["database"])), tracking_uri=server["uri"]
    )
    if name == "big":  # every trial counted: the long histories' best steps are used
        assert len(reference.trials) == CUT_RUNS + 1 + SMALL_RUNS
    assert summarize(SummaryRequest(name, server["uri"])) == reference
    assert (
        summarize(SummaryRequest(name, server["uri"]), client=MlflowClient(server["uri"]))
        == reference
    )


def test_an_unknown_experiment_through_the_server_names_the_known_ones(server):
    with pytest.raises(SummarizeError, match=r"no experiment named 'nope'.*'big'.*'edge'"):
        summarize(SummaryRequest("nope", server["uri"]))


def test_cli_json_through_the_server_without_importing_mlflow(server):
    """`sweeper summarize --format json` prints the same JSON through the server as on
    the database (but for the URI it names), and the server path imports no MLflow."""
    code = (
        "import sys\n"
        "from sweeper.cli.main import main\n"
        "status = main(['summarize', '--experiment', 'lab', '--tracking-uri', sys.argv[1],"
        " '--format', 'json'])\n"
        "print('mlflow imported:', 'mlflow' in sys.modules, file=sys.stderr)\n"
        "sys.exit(status)\n"
    )

    def summarise(uri: str) -> tuple[dict, str]:
        done = subprocess.run(
            [sys.executable, "-c", code, uri], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout), done.stderr

    first, log = summarise(server["uri"])  # logs the report (and imports MLflow to do it)
    assert "report logged" in log
    through, log = summarise(server["uri"])
    assert "report unchanged" in log and "mlflow imported: False" in log
    assert through == first
    direct, _ = summarise(server["database"])
    assert through.pop("tracking_uri") == server["uri"]
    assert direct.pop("tracking_uri") == server["database"]
    assert through == direct
    assert len(through["trials"]) == len(lab_trials())
