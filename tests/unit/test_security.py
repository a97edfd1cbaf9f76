"""Security: secrets never reach the MLflow record, user text never escapes a folder,
YAML is safe-loaded everywhere, servers bind loopback unless told otherwise.

The record test writes a real parent run and real trial runs into a real MLflow
SQLite store, with a secret set in the environment and referenced by the spec, then
reads back every param, tag and artifact: the secret's value must be in none of them.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from sweeper.redact import MASK, redact, safe_name, secret_values
from sweeper.spec.load import load_spec
from sweeper.trial_keys import expand
from tests.support.specs import minimal_spec

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-Value-0042"
PASSWORD = "hunter2-db-pass"


def test_redact_masks_secret_looking_variables_and_url_passwords():
    env = {
        "MY_API_TOKEN": SECRET,
        "db_password": PASSWORD,
        "AWS_SECRET_ACCESS_KEY": "abcd/efgh",
        "SHORT_KEY": "1",  # a flag, not a secret: numbers must stay readable
        "HOME": "/home/user",
    }
    text = f"a {SECRET} b {PASSWORD} c abcd/efgh lr 1e-05 home /home/user"
    assert redact(text, env) == f"a {MASK} b {MASK} c {MASK} lr 1e-05 home /home/user"
    assert secret_values(env) == sorted([SECRET, PASSWORD, "abcd/efgh"], key=len, reverse=True)
    assert redact("postgresql://mlflow:pw@db:5432/mlflow", {}) == (
        f"postgresql://mlflow:{MASK}@db:5432/mlflow"
    )
    assert redact("http://mlflow:5000/api", {}) == "http://mlflow:5000/api"  # a port, no user


@pytest.mark.parametrize(
    "text", ["../../etc/passwd", "..", "a/../../b", "x\\..\\y", "/abs/path", "..hidden", "a\0b"]
)
def test_safe_name_is_one_harmless_path_component(text, tmp_path):
    name = safe_name(text)
    assert "/" not in name and "\\" not in name and "\0" not in name
    assert name not in {".", ".."} and not name.startswith(".")
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_safe_name_keeps_ordinary_trial_names():
    for name in ("hf-pretrained-full-s1", "fairseq-random-full-lr1e-05-s3", "hf-x-lora-r16-s2"):
        assert safe_name(name) == name


def _write(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_grid_values_cannot_traverse_out_of_the_trials_folder(tmp_path):
    from sweeper.trainers.trial_pipeline import trial_dir

    raw = minimal_spec()
    raw["grid"] = {
        "seed": [1],
        "init": ["random"],
        "framework": ["hf"],
        "method": ["lora"],
        "params": {"lora.target_modules": [["../../../../tmp/evil"], ["/etc/x", ".."]]},
    }
    spec = load_spec(_write(tmp_path, raw))
    trials, _ = expand(spec)
    assert len(trials) == 2
    root = (spec.output_dir / "trials").resolve()
    for trial in trials:
        assert "/" not in trial.name and not trial.name.startswith(".")
        assert trial_dir(spec, trial).resolve().parent == root


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}")


def _everything_logged(client, experiment_id: str, tmp_path: Path) -> list[str]:
    """Every param, tag (key and value), run name and artifact text of the experiment."""
    seen = []
    for run in client.search_runs([experiment_id]):
        seen += [run.info.run_name or ""]
        seen += [f"{k}={v}" for k, v in run.data.params.items()]
        seen += [f"{k}={v}" for k, v in run.data.tags.items()]
        local = Path(
            client.download_artifacts(run.info.run_id, "", str(tmp_path / run.info.run_id))
        )
        seen += [p.read_text(encoding="utf-8") for p in local.rglob("*") if p.is_file()]
    return seen


def test_secrets_in_the_environment_never_reach_params_tags_or_artifacts(
    client, tmp_path, monkeypatch
):
    from sweeper.tracking.artifacts import upload_logs
    from sweeper.tracking.recorder import MetricLog, Recorder
    from sweeper.tracking.runs import create_trial_run
    from sweeper.tracking.sweep_run import open_sweep_run, record_sweep

    monkeypatch.setenv("MY_API_TOKEN", SECRET)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    raw = minimal_spec()
    raw["name"] = "secrets"
    # How secrets get into a spec: a tracking URI with credentials, and any `${VAR}`.
    raw["tracking"] = {"uri": "https://me:${MLFLOW_TRACKING_PASSWORD}@mlflow.example:5000"}
    raw["lora"] = {"target_modules": ["query-${MY_API_TOKEN}"]}
    raw["grid"] = {"seed": [1], "init": ["random"], "framework": ["hf"], "method": ["lora"]}
    spec_file = _write(tmp_path, raw)
    spec = load_spec(spec_file)
    assert spec.tracking.uri is not None and PASSWORD in spec.tracking.uri  # it did resolve

    experiment = client.create_experiment("secrets", artifact_location=(tmp_path / "a").as_uri())
    parent = open_sweep_run(client, experiment, spec)
    trials, _ = expand(spec)
    record_sweep(client, parent, spec, spec_file, len(trials))
    (trial,) = trials
    assert SECRET in str(trial.identity())  # the value is in what the params come from
    run_id = create_trial_run(client, experiment, parent, trial)
    out = tmp_path / "trial"
    out.mkdir()
    (out / "trainer.log").write_text(f"env: MY_API_TOKEN={SECRET}\nstep 1\n", encoding="utf-8")
    (out / "events.jsonl").write_text('{"step": 1}\n', encoding="utf-8")
    upload_logs(out, client.get_run(run_id).info.artifact_uri, client.tracking_uri)
    # A failure whose traceback quotes the credentials: tag and error.txt are masked.
    recorder = Recorder(client, {trial.key: run_id}, MetricLog())
    recorder.failed(trial.key, f"ConnectionError: https://me:{PASSWORD}@mlflow.example ({SECRET})")
    recorder.drain()

    logged = _everything_logged(client, experiment, tmp_path / "down")
    leaks = [item for item in logged if SECRET in item or PASSWORD in item]
    assert not leaks
    joined = "\n".join(logged)
    assert f'lora.target_modules=["query-{MASK}"]' in joined  # masked, not dropped
    assert f"me:{MASK}@mlflow.example" in joined  # the resolved spec, masked
    assert "${MLFLOW_TRACKING_PASSWORD}" in joined  # the spec as written keeps the reference
    assert f"MY_API_TOKEN={MASK}" in joined  # the trainer log, masked
    assert '{"step": 1}' in joined  # files without secrets are uploaded unchanged
    assert f"sweeper.error=ConnectionError: https://me:{MASK}@" in joined


def test_yaml_is_only_ever_safe_loaded():
    unsafe = re.compile(r"yaml\.(load|load_all|unsafe_load|full_load)\(|yaml\.(Unsafe|Full)?Loader")
    for path in [*(REPO / "src").rglob("*.py"), *(REPO / "tests").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not unsafe.search(text), path


def test_the_ui_binds_loopback_unless_told_otherwise():
    from sweeper.cli import ui

    parser = argparse.ArgumentParser()
    ui.build_parser(parser)
    assert parser.parse_args(["s.yaml"]).host == "127.0.0.1"
    assert parser.parse_args(["s.yaml", "--host", "0.0.0.0"]).host == "0.0.0.0"
    command = ui.server_command("sqlite:////x/mlflow.db", Path("/x/a"), "127.0.0.1", 5000)
    assert command[command.index("--host") + 1] == "127.0.0.1"


def test_the_ui_needs_consent_to_bind_beyond_loopback(capsys):
    from sweeper.cli import ui

    ui._consent("127.0.0.1", 5000, allowed=False)  # loopback: nothing to say
    with pytest.raises(SystemExit) as refused:
        ui._consent("0.0.0.0", 5000, allowed=False)
    assert refused.value.code == 2
    assert "--allow-remote" in capsys.readouterr().err
    ui._consent("0.0.0.0", 5000, allowed=True)
    assert "warning: --host 0.0.0.0 serves the whole store" in capsys.readouterr().err


def test_links_out_of_a_trial_folder_are_found_and_names_contained(tmp_path):
    from sweeper.redact import contained, links_outside

    trial = tmp_path / "trial"
    (trial / "checkpoints").mkdir(parents=True)
    (tmp_path / "secret").write_text("x")
    (trial / "checkpoints" / "inside.pt").write_text("w")
    (trial / "checkpoints" / "ok").symlink_to(trial / "checkpoints" / "inside.pt")
    (trial / "checkpoints" / "leak").symlink_to(tmp_path / "secret")
    assert links_outside(trial) == [trial / "checkpoints" / "leak"]
    assert contained(trial, "checkpoints/best.pt") == (trial / "checkpoints/best.pt").resolve()
    for name in ("../secret", "/etc/passwd", "checkpoints/../../secret"):
        with pytest.raises(ValueError, match="leads out of"):
            contained(trial, name)


def test_an_upload_refuses_a_trial_folder_with_a_link_out(tmp_path):
    from sweeper.tracking.artifacts import UploadError, upload_trial
    from sweeper.trainers.base import Checkpoints

    trial = tmp_path / "trial"
    (trial / "checkpoints" / "best").mkdir(parents=True)
    (tmp_path / "secret").write_text("x")
    (trial / "checkpoints" / "best" / "weights").symlink_to(tmp_path / "secret")
    result = SimpleNamespace(
        out_dir=trial, checkpoints=Checkpoints(trial / "checkpoints" / "best", None)
    )
    with pytest.raises(UploadError, match="leading out of the trial folder"):
        upload_trial(result, str(tmp_path / "store"), "")
    assert not (tmp_path / "store").exists()


def test_submit_never_uploads_env_files():
    from sweeper.cli.submit import EXCLUDES

    assert ".env" in EXCLUDES
