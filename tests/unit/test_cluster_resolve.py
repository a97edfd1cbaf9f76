"""The tracking-URI precedence, Ray job-copy detection and re-rooting, the cluster state."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from sweeper.cli.main import main
from sweeper.deploy import resolve, state
from sweeper.deploy.local import is_loopback
from sweeper.deploy.resolve import (
    NotDurable,
    durable_spec,
    job_copy_root,
    record_in_copy,
    resolve_tracking_uri,
)
from sweeper.deploy.state import ClusterState, group_alive, load_state, save_state
from sweeper.deploy.up_checks import port_taken
from sweeper.spec.load import load_spec

SPEC = {
    "name": "demo",
    "output_dir": "../runs/demo",
    "data": {"source": "generated", "dir": "../runs/demo/corpus", "generate": {}},
    "model": {
        "arch": {"layers": 1, "embed_dim": 16, "ffn_dim": 32, "heads": 2, "max_positions": 64},
        "sentencepiece": "../runs/demo/corpus/sentencepiece.bpe.model",
        "dictionary": "../runs/demo/corpus/dict.txt",
    },
    "grid": {"seed": [1], "init": ["random"], "framework": ["dummy"]},
}


def _state(tmp_path: Path, port: int = 5999) -> ClusterState:
    return ClusterState(
        host="127.0.0.1", ray_port=6379, dashboard_port=8265, mlflow_port=port,
        storage=str(tmp_path / "storage"), ray_temp_dir="/tmp/sweeper-ray-x", auth_mode="disabled",
        ray_pgid=0, mlflow_pgid=0, backend_store_uri="sqlite:///x.db",
        artifacts_destination="/x", log_dir="/x/logs",
    )  # fmt: skip


def _write(folder: Path, **changes: object) -> Path:
    path = folder / "sweeps" / "demo.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({**SPEC, **changes}), encoding="utf-8")
    return path


@pytest.fixture
def no_env(monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", state.STORAGE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(resolve, "running_cluster", lambda: None)


@pytest.fixture
def job_copy(tmp_path: Path) -> Path:
    """A folder where Ray 2.60 unpacks a job's working dir."""
    root = tmp_path / "session_x" / "runtime_resources" / "working_dir_files" / "_ray_pkg_abc123"
    root.mkdir(parents=True)
    return root


def test_precedence_flag_spec_env_cluster_default(tmp_path, monkeypatch, no_env):
    spec_path = _write(tmp_path)
    spec = load_spec(spec_path)
    default = f"sqlite:///{tmp_path / 'runs' / 'demo' / 'mlflow.db'}"
    assert resolve_tracking_uri(spec) == resolve.ResolvedUri(default, "default")
    monkeypatch.setattr(resolve, "running_cluster", lambda: _state(tmp_path))
    assert resolve_tracking_uri(spec).uri == "http://127.0.0.1:5999"
    assert resolve_tracking_uri(spec).source == "cluster"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:1")
    assert resolve_tracking_uri(spec).uri == "http://env:1"
    with_uri = load_spec(spec_path, ["tracking.uri=http://spec:2"])
    assert resolve_tracking_uri(with_uri).uri == "http://spec:2"
    assert resolve_tracking_uri(with_uri, "http://flag:3").uri == "http://flag:3"


def test_job_copy_root_is_recognised_by_its_place(tmp_path, job_copy):
    assert job_copy_root(job_copy / "sweeps" / "demo.yaml") == job_copy
    assert job_copy_root(job_copy) == job_copy
    assert job_copy_root(tmp_path / "checkout" / "sweeps" / "demo.yaml") is None
    lookalike = tmp_path / "elsewhere" / "_ray_pkg_abc123"  # not under working_dir_files
    assert job_copy_root(lookalike / "x.yaml") is None


def test_outside_a_job_copy_nothing_moves(tmp_path, no_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec_path = _write(tmp_path / "checkout")
    spec = load_spec(spec_path)
    assert durable_spec(spec, spec_path) == (spec, None)


def test_job_outputs_are_rerooted_onto_storage(tmp_path, job_copy, no_env, monkeypatch):
    storage = tmp_path / "storage"
    monkeypatch.setenv(state.STORAGE_ENV, str(storage))
    monkeypatch.chdir(job_copy)
    spec_path = _write(job_copy)
    spec, placement = durable_spec(load_spec(spec_path), "sweeps/demo.yaml")
    assert placement is not None and placement.copy_root == job_copy
    assert spec.output_dir == storage / "runs" / "demo"
    assert spec.data.dir == storage / "runs" / "demo" / "corpus"
    assert spec.model.dictionary == storage / "runs" / "demo" / "corpus" / "dict.txt"
    assert set(placement.moved) == {
        "output_dir", "data.dir", "model.sentencepiece", "model.dictionary",
    }  # fmt: skip
    assert resolve_tracking_uri(spec).uri == f"sqlite:///{storage / 'runs' / 'demo' / 'mlflow.db'}"


def test_uploaded_inputs_stay_in_the_copy(tmp_path, job_copy, no_env, monkeypatch):
    monkeypatch.setenv(state.STORAGE_ENV, str(tmp_path / "storage"))
    data = job_copy / "data"
    data.mkdir()
    (data / "dict.txt").write_text("a 1\n")
    spec_path = _write(
        job_copy,
        data={"source": "files", "dir": "../data"},
        model={**SPEC["model"], "dictionary": "../data/dict.txt"},
    )
    spec, placement = durable_spec(load_spec(spec_path), spec_path)
    assert spec.data.dir == data  # exists in the copy: an uploaded input, read in place
    assert spec.model.dictionary == data / "dict.txt"
    assert "model.sentencepiece" in placement.moved  # missing in the copy: written
    assert spec.output_dir == tmp_path / "storage" / "runs" / "demo"


def test_absolute_output_dir_outside_the_copy_is_kept(tmp_path, job_copy, no_env):
    out = tmp_path / "shared" / "demo"
    spec_path = _write(
        job_copy,
        output_dir=str(out),
        data={"source": "generated", "dir": str(out / "corpus"), "generate": {}},
        model={
            **SPEC["model"],
            "sentencepiece": str(out / "corpus" / "sp.model"),
            "dictionary": str(out / "corpus" / "dict.txt"),
        },
    )
    spec = load_spec(spec_path)
    assert durable_spec(spec, spec_path) == (spec, None)  # no storage needed either


def test_no_durable_place_is_an_error_naming_what_to_set(tmp_path, job_copy, no_env):
    spec_path = _write(job_copy)
    with pytest.raises(NotDurable, match="SWEEPER_STORAGE=/durable/folder"):
        durable_spec(load_spec(spec_path), spec_path)


def test_running_cluster_storage_is_the_fallback(tmp_path, job_copy, no_env, monkeypatch):
    spec_path = _write(job_copy)
    spec, _ = durable_spec(load_spec(spec_path), spec_path, cluster=_state(tmp_path))
    assert spec.output_dir == tmp_path / "storage" / "runs" / "demo"


def test_sweeper_run_in_a_job_copy_without_storage_exits_2(
    tmp_path, job_copy, no_env, monkeypatch, capsys
):
    monkeypatch.setattr(state, "running_cluster", lambda: None)
    monkeypatch.chdir(job_copy)
    _write(job_copy)
    with pytest.raises(SystemExit) as exited:
        main(["run", "sweeps/demo.yaml"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Ray's temporary copy of the working dir" in err and "SWEEPER_STORAGE" in err
    assert not (job_copy / "runs").exists()  # nothing was written


def test_record_in_copy(tmp_path, job_copy, monkeypatch):
    monkeypatch.chdir(job_copy)
    assert record_in_copy("sqlite:///runs/mlflow.db", job_copy)  # relative: the copy
    assert record_in_copy(f"sqlite:///{job_copy / 'x.db'}", job_copy)
    assert not record_in_copy(f"sqlite:///{tmp_path / 'x.db'}", job_copy)
    assert not record_in_copy("http://127.0.0.1:5000", job_copy)


def test_state_file_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv(state.HOME_ENV, str(tmp_path / "home"))
    assert load_state() is None
    written = save_state(_state(tmp_path))
    assert written == tmp_path / "home" / "cluster.json"
    assert load_state() == _state(tmp_path)
    assert load_state().gcs_address == "127.0.0.1:6379"
    assert load_state().dashboard_url == "http://127.0.0.1:8265"
    state.remove_state()
    state.remove_state()  # idempotent
    assert load_state() is None


def test_group_alive_checks_the_leader_is_still_ours():
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert group_alive(proc.pid, b"sleep")
        assert not group_alive(proc.pid, b"mlflow")  # a recycled pid is not our server
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not group_alive(proc.pid, b"sleep")


def test_loopback_and_port_checks():
    assert is_loopback("127.0.0.1") and is_loopback("127.0.0.2") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert port_taken("127.0.0.1", sock.getsockname()[1])


def test_mlflow_allowed_hosts_only_where_mlflow_would_refuse_the_host():
    from sweeper.deploy.local import UpOptions, _allowed_hosts

    assert _allowed_hosts(UpOptions(host="127.0.0.1")) == []
    assert _allowed_hosts(UpOptions(host="0.0.0.0")) == []
    flag, hosts = _allowed_hosts(UpOptions(host="127.0.0.2"))
    assert flag == "--allowed-hosts" and "127.0.0.2:*" in hosts.split(",")
    assert _allowed_hosts(UpOptions(host="h", mlflow_args=("--allowed-hosts", "x"))) == []
