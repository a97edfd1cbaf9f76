"""Which tracking URIs the REST reader takes, and how it reads a bulk answer's runs.
Its reads themselves are tested on a real server: tests/integration/test_summarize_server.py."""

from __future__ import annotations

import base64
import json

import pytest

from sweeper.summarize.http_store import (
    CREDENTIAL_SETTINGS,
    HttpStore,
    _grouped_runs,
    offset_token,
    open_http,
)
from sweeper.summarize.records import Point


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    for name in CREDENTIAL_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_plain_server_is_read_over_rest(no_credentials):
    assert isinstance(open_http("http://127.0.0.1:5000"), HttpStore)
    assert isinstance(open_http("https://mlflow.example.org/prefix"), HttpStore)


@pytest.mark.parametrize(
    "uri", ["sqlite:///x.db", "postgresql://mlflow@127.0.0.1/mlflow", "databricks", "file:///x"]
)
def test_other_stores_are_not_servers(no_credentials, uri):
    assert open_http(uri) is None


@pytest.mark.parametrize("name", CREDENTIAL_SETTINGS)
def test_credentials_leave_the_server_to_mlflows_client(no_credentials, monkeypatch, name):
    monkeypatch.setenv(name, "x")
    assert open_http("http://127.0.0.1:5000") is None


def test_a_credentials_file_or_a_user_in_the_uri_leaves_it_to_mlflow(no_credentials):
    assert open_http("http://me:secret@127.0.0.1:5000") is None
    (no_credentials / ".mlflow").mkdir()
    (no_credentials / ".mlflow" / "credentials").write_text("[mlflow]\n")
    assert open_http("http://127.0.0.1:5000") is None


def test_offset_token_is_mlflows_encoding():
    assert json.loads(base64.b64decode(offset_token(250))) == {"offset": 250}


def test_grouped_runs_in_order_or_none_when_a_run_comes_back():
    p = Point(1, 1, 1.0)
    assert _grouped_runs([("a", p), ("a", p), ("c", p), ("b", p)]) == ["a", "c", "b"]
    assert _grouped_runs([("a", p), ("b", p), ("a", p)]) is None
    assert _grouped_runs([]) == []
