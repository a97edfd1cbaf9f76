"""A database URI whose driver is not installed is one line naming the install command,
wherever sweeper meets the URI first: `sweeper cluster up --backend-store-uri` (before
it starts anything), `sweeper run` / `summarize` / `ui` given the URI as their store.

psycopg2 is really absent here (the `server` extra installs psycopg 3), so a
`postgresql+psycopg2://` URI is a real missing driver; a missing psycopg 3 is faked by
making its import fail, which is what SQLAlchemy would meet on a machine without it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.deploy.local import UpOptions, up
from sweeper.deploy.up_checks import ClusterError
from sweeper.summarize.mlflow_reader import SummarizeError, check_store
from sweeper.tracking.drivers import DriverMissing, check_driver, is_database
from sweeper.tracking.server import check_server
from tests.support.cluster import free_port
from tests.support.specs import SWEEPS

PG = "postgresql://mlflow:hunter22@127.0.0.1:5433/mlflow"
PG2 = "postgresql+psycopg2://mlflow:hunter22@127.0.0.1:5433/mlflow"
EXTRA = "pip install 'sweeper[server]'"


@pytest.fixture
def no_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import psycopg` fails as on a machine without the `server` extra."""
    monkeypatch.setitem(sys.modules, "psycopg", None)


def _one_line(message: str) -> str:
    assert "\n" not in message and "Traceback" not in message, message
    assert "hunter22" not in message, "the password is not printed"
    return message


def test_the_installed_extra_is_the_driver_of_a_plain_postgresql_uri():
    check_driver(PG)  # psycopg 3, from `make install`: nothing to say
    for uri in ("sqlite:///x.db", "http://127.0.0.1:5000", "file:///tmp/m", "mlruns"):
        assert not is_database(uri)
        check_driver(uri)
    assert is_database(PG) and is_database(PG2) and is_database("mysql://u@h/db")


def test_missing_psycopg_names_the_server_extra(no_psycopg: None):
    with pytest.raises(DriverMissing) as raised:
        check_driver(PG)
    message = _one_line(str(raised.value))
    assert "psycopg" in message
    assert EXTRA in message and "mlflow:***@127.0.0.1:5433" in message


def test_a_driver_outside_the_extra_names_its_package_and_the_plain_form():
    with pytest.raises(DriverMissing) as raised:
        check_driver(PG2)
    message = _one_line(str(raised.value))
    assert "No module named 'psycopg2'" in message
    assert "pip install psycopg2-binary" in message and EXTRA in message
    with pytest.raises(DriverMissing, match=r"knows no 'postgres'.*postgresql://"):
        check_driver("postgres://mlflow@127.0.0.1/mlflow")  # not a SQLAlchemy scheme


def test_the_store_checks_of_run_and_summarize_report_it(no_psycopg: None):
    with pytest.raises(DriverMissing):
        check_server(PG)
    with pytest.raises(SummarizeError, match=r"sweeper\[server\]"):
        check_store(PG)
    check_server("sqlite:///no/such/file.db")  # the SQLite path never asks SQLAlchemy


def test_cluster_up_refuses_before_starting_anything(no_psycopg: None, tmp_path: Path):
    options = UpOptions(
        ray_port=free_port(), dashboard_port=free_port(), mlflow_port=free_port(),
        storage=tmp_path / "storage", backend_store_uri=PG,
    )  # fmt: skip
    with pytest.raises(ClusterError) as raised:
        up(options)
    assert raised.value.bad_input  # exit 2
    assert str(raised.value).startswith("--backend-store-uri: ") and EXTRA in str(raised.value)
    assert not (tmp_path / "storage").exists()  # no log folder, no server, no state


@pytest.mark.parametrize("command", ["cluster", "summarize"])
def test_the_cli_prints_one_line_and_exits_2(command: str, tmp_path: Path):
    """The real CLI, the real missing psycopg2: exit 2, stderr one `error:` line."""
    if command == "cluster":
        ports = [str(free_port()) for _ in range(3)]
        args = ["cluster", "up", "--backend-store-uri", PG2, "--storage", str(tmp_path / "s"),
                "--ray-port", ports[0], "--dashboard-port", ports[1],
                "--mlflow-port", ports[2]]  # fmt: skip
    else:
        spec = tmp_path / "demo.yaml"  # a copy: the command's log goes beside its outputs
        shutil.copy(SWEEPS / "demo.yaml", spec)
        args = ["summarize", str(spec), "--tracking-uri", PG2]
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli.main", *args],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "psycopg2" in line and EXTRA in _one_line(line)
    assert not (tmp_path / "s").exists()
