"""`sweeper ui` and `sweeper submit`: what they decide before starting any process.

Both must refuse bad input with exit 2 and a message naming the problem, without
contacting a server; the servers themselves are exercised in
tests/integration/test_cluster_*.py.
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from sweeper.cli import submit, ui
from sweeper.cli.main import main
from sweeper.tracking.links import experiment_url
from sweeper.tracking.store import sqlite_path
from tests.support.specs import minimal_spec


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_help_lists_submit_and_ui(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "submit     submit `sweeper run`" in text and "ui         open the MLflow UI" in text


def test_ui_without_a_store_exits_2_saying_run_first(write_spec, tmp_path, capsys):
    spec = write_spec({**minimal_spec(), "output_dir": str(tmp_path / "nothing")})
    with pytest.raises(SystemExit) as exc:
        main(["ui", str(spec)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"no runs yet: run `sweeper run {spec}` first" in err
    assert f"(no store at {tmp_path / 'nothing' / 'mlflow.db'})" in err


def test_ui_on_a_tracking_server_only_prints_its_url(write_spec, capsys):
    uri = f"http://127.0.0.1:{_closed_port()}"  # nothing listens: nothing is contacted
    spec = write_spec({**minimal_spec(), "tracking": {"uri": uri}})
    assert main(["ui", str(spec)]) == 0
    assert f"its UI: {uri}" in capsys.readouterr().out


def test_ui_urls_and_store_paths():
    assert sqlite_path("sqlite:////abs/out/mlflow.db") == Path("/abs/out/mlflow.db")
    assert sqlite_path("sqlite:///rel/mlflow.db") == Path("rel/mlflow.db")
    assert sqlite_path("postgresql://u@db/mlflow") is None
    assert experiment_url("http://127.0.0.1:5000/", "7") == (
        "http://127.0.0.1:5000/#/experiments/7/runs"
        "?workflowType=machine_learning&viewStateShareKey=sweeper"
    )  # the runs table of the model-training view, not MLflow 3's GenAI overview
    assert experiment_url("http://127.0.0.1:5000", None) == "http://127.0.0.1:5000"
    command = ui.server_command("sqlite:////x/mlflow.db", Path("/x/art"), "127.0.0.1", 5001)
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--default-artifact-root") + 1] == "file:///x/art"


def test_submit_rejects_a_bad_spec_before_contacting_the_cluster(write_spec, capsys):
    bad = minimal_spec()
    bad["train"] = {"epochs": 0}
    spec = write_spec(bad)
    address = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(SystemExit) as exc:
        main(["submit", str(spec), "--address", address])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "train.epochs" in err and "Ray job server" not in err


def test_submit_needs_the_spec_inside_the_working_dir(write_spec, tmp_path, capsys):
    spec = write_spec(minimal_spec())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "submit",
                str(spec),
                "--address",
                "http://127.0.0.1:1",
                "--working-dir",
                str(elsewhere),
            ]
        )
    assert exc.value.code == 2
    assert "must be inside --working-dir" in capsys.readouterr().err


def test_submit_reports_an_unreachable_job_server_with_exit_2(write_spec, tmp_path, capsys):
    spec = write_spec(minimal_spec())
    address = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(SystemExit) as exc:
        main(["submit", str(spec), "--address", address, "--working-dir", str(tmp_path)])
    assert exc.value.code == 2
    assert f"cannot reach the Ray job server at {address}" in capsys.readouterr().err


def test_submit_entrypoint_quotes_and_passes_options(tmp_path):
    args = argparse.Namespace(tracking_uri="http://m:5000", resume=True, max_concurrent=3)
    command = submit.entrypoint("sweeps/a b.yaml", ["grid.seed=[1, 2]"], args)
    assert command == (
        "sweeper run 'sweeps/a b.yaml' 'grid.seed=[1, 2]' "
        "--tracking-uri http://m:5000 --resume --max-concurrent 3"
    )
    (tmp_path / "sweeps").mkdir()
    spec = tmp_path / "sweeps" / "s.yaml"
    spec.write_text("x", encoding="utf-8")
    assert submit.spec_in_working_dir(str(spec), str(tmp_path)) == "sweeps/s.yaml"


def test_a_server_that_did_not_start_is_explained_by_its_error_lines(tmp_path):
    log = tmp_path / "sweeper-ui.log"
    log.write_text("ERROR: an earlier command's\n", encoding="utf-8")
    start = log.stat().st_size
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("INFO:     Started server process [1]\n")
        handle.write(
            "ERROR:    [Errno 98] error while attempting to bind: address already in use\n"
        )
        handle.write("INFO:     Application shutdown complete.\n")
    assert ui._error_lines(log, start) == [
        "ERROR:    [Errno 98] error while attempting to bind: address already in use"
    ]
    assert ui._error_lines(None, 0) == []


def test_ui_gives_a_record_made_before_the_shared_view_its_view_once(tmp_path):
    from mlflow import MlflowClient

    from sweeper.summarize.sqlite_store import open_sqlite
    from sweeper.tracking.links import VIEW_TAG, needs_view
    from sweeper.tracking.store import DEFAULT_VIEW_METRICS

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    old = client.create_experiment("old", artifact_location=(tmp_path / "art").as_uri())
    store = open_sqlite(uri)
    assert store is not None and store.experiment_tag(old, VIEW_TAG) is None
    ui._ensure_view(uri, old, DEFAULT_VIEW_METRICS)
    written = store.experiment_tag(old, VIEW_TAG)
    assert written == client.get_experiment(old).tags[VIEW_TAG]
    assert not needs_view(written, DEFAULT_VIEW_METRICS)
    ui._ensure_view(uri, old, DEFAULT_VIEW_METRICS)
    assert store.experiment_tag(old, VIEW_TAG) == written  # the same view: not rewritten
