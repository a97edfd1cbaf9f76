"""The backend table: what exists, what each runs, plugins, and who asks it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import backends
from sweeper.data.examples import SPLITS
from sweeper.spec.load import SpecError, validate_mapping
from sweeper.trainers.base import TrialJob
from sweeper.trainers.registry import get_trainer
from sweeper.trial_keys import expand
from tests.support.specs import minimal_spec


def test_builtins_and_the_test_plugin_are_registered() -> None:
    # tests/conftest.py names tests.support.dummy_trainer:register in $SWEEPER_PLUGINS.
    assert backends.frameworks()[:2] == ["fairseq", "hf"]
    assert "dummy" in backends.frameworks()
    assert backends.tasks()[:2] == ["classification", "causal_lm"]
    assert backends.get("hf", "causal_lm").data == "lm"


def test_methods_come_from_the_entries() -> None:
    assert backends.unsupported("hf", "classification", "lora") is None
    assert (
        backends.unsupported("fairseq", "classification", "lora")
        == "LoRA trials run on HF (PEFT) only"
    )
    with pytest.raises(KeyError, match="unknown framework 'jax'; registered: dummy, fairseq"):
        backends.unsupported("jax", "classification", "full")


def test_what_is_missing_is_said_by_the_table() -> None:
    assert backends.missing("hf", "causal_lm") is None
    assert backends.missing("fairseq", "causal_lm") == (
        "causal_lm has no fairseq backend (it runs on hf)"
    )
    assert backends.missing("hf", "ranking") == (
        "unknown task 'ranking'; registered: causal_lm, classification"
    )


def test_every_backend_of_a_task_shares_its_preparation() -> None:
    other = dataclasses.replace(backends.CLASSIFICATION, prepare="elsewhere:prepare")
    entry = dataclasses.replace(backends.get("dummy", "classification"), task=other)
    with pytest.raises(ValueError, match="every backend of a task shares its Task"):
        backends.register(entry)
    assert backends.get("dummy", "classification").task == backends.CLASSIFICATION


def test_backends_that_read_one_folder_name_one_writer() -> None:
    assert backends.writers("classification") == {
        "fairseq": "sweeper.data.binarize:write_fairseq",
        "hf": "sweeper.data.binarize:write_hf",
    }
    assert backends.writers("causal_lm") == {}  # its preparation writes its one folder
    entry = dataclasses.replace(backends.get("dummy", "classification"), write="my:write")
    with pytest.raises(ValueError, match="backends that read one folder name one writer"):
        backends.register(entry)


def test_a_framework_without_the_tasks_backend_is_reported_with_the_rest(tmp_path: Path) -> None:
    raw = minimal_spec()
    raw["task"] = "causal_lm"
    raw["grid"] = {"framework": ["fairseq", "hf", "dummy"], "seed": "x"}
    with pytest.raises(SpecError) as caught:
        validate_mapping(raw, "s.yaml", tmp_path)
    shown = [str(p) for p in caught.value.problems]
    assert "s.yaml: grid.framework.0: causal_lm has no fairseq backend (it runs on hf)" in shown
    assert "s.yaml: grid.framework.2: causal_lm has no dummy backend (it runs on hf)" in shown
    assert any(p.startswith("s.yaml: grid.seed") for p in shown)


def test_the_grid_skips_what_a_framework_cannot_run(tmp_path: Path) -> None:
    raw = minimal_spec()
    raw["grid"] = {"seed": [1], "init": ["random"], "framework": ["fairseq", "hf"],
                   "method": ["full", "lora"]}  # fmt: skip
    trials, skipped = expand(validate_mapping(raw, "s.yaml", tmp_path))
    assert sorted((t.framework, t.method) for t in trials) == [
        ("fairseq", "full"), ("hf", "full"), ("hf", "lora"),
    ]  # fmt: skip
    assert [(s.combination, s.reason) for s in skipped] == [
        ("framework=fairseq method=lora", "LoRA trials run on HF (PEFT) only")
    ]


def test_unknown_frameworks_are_reported_with_every_other_problem(tmp_path: Path) -> None:
    raw = minimal_spec()
    raw["grid"] = {"framework": ["hf", "tf", "jax"], "seed": "x"}
    with pytest.raises(SpecError) as caught:
        validate_mapping(raw, "s.yaml", tmp_path)
    shown = [str(p) for p in caught.value.problems]
    assert "s.yaml: grid.framework.1: unknown framework 'tf'; registered: dummy, fairseq, hf" in (
        shown
    )
    assert any(p.startswith("s.yaml: grid.framework.2: unknown framework 'jax'") for p in shown)
    assert any(p.startswith("s.yaml: grid.seed") for p in shown)


def test_the_trainer_says_what_a_reload_needs() -> None:
    job = TrialJob(
        framework="hf", seed=1, init="random", method="lora", train={}, lora={}, arch={},
        num_classes=2, num_train=1, data="/h", init_checkpoint="/i.pt", out_dir="/o",
    )  # fmt: skip
    assert get_trainer("hf").reload_inputs(job) == ["/h", "/i.pt"]
    assert get_trainer("hf", "causal_lm").reload_inputs(job) == ["/h", "/i.pt"]
    job = dataclasses.replace(job, framework="fairseq", method="full", data="/f")
    assert get_trainer("fairseq").reload_inputs(job) == ["/f"]


@pytest.mark.parametrize(
    ("framework", "extra", "task", "data"),
    [
        ("fairseq", {}, "classification", "/f"),
        ("hf", {"select": {"metric": "valid_macro_f1", "mode": "max"}}, "classification", "/h"),
        ("hf", {"task": "causal_lm", "select": {}}, "causal_lm", "/lm"),
    ],
)
def test_a_job_saved_with_a_folder_per_format_loads_as_its_backends_one(
    tmp_path: Path, framework: str, extra: dict, task: str, data: str
) -> None:
    """A stored trial.json of the older layout (`summarize --evaluate` reloads it)."""
    both = {"fairseq_data": data, "hf_data": data} if task == "causal_lm" else {}
    saved = {
        "framework": framework, "seed": 1, "init": "random", "method": "full", "train": {},
        "lora": None, "arch": {}, "num_classes": 2, "num_train": 1, "fairseq_data": "/f",
        "hf_data": "/h", **both, "init_checkpoint": "/i.pt", "out_dir": "/o", "threads": 1,
        "device": "cpu", "extra": extra,
    }  # fmt: skip
    (tmp_path / "trial.json").write_text(json.dumps(saved))
    job = TrialJob.load(tmp_path / "trial.json")
    assert (job.task, job.data) == (task, data)
    assert "task" not in job.extra
    job.save(tmp_path / "again.json")
    assert TrialJob.load(tmp_path / "again.json") == job


def _run_with_plugins(value: str) -> subprocess.CompletedProcess[str]:
    code = "from sweeper import backends; print(backends.frameworks())"
    env = {
        "SWEEPER_PLUGINS": value,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.environ["PYTHONPATH"],  # the repository root (tests/conftest.py)
    }
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_a_plugin_named_in_the_environment_is_loaded_in_a_new_process() -> None:
    done = _run_with_plugins("tests.support.dummy_trainer:register")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['fairseq', 'hf', 'dummy']"
    assert _run_with_plugins("").stdout.strip() == "['fairseq', 'hf']"


def test_a_plugin_that_does_not_load_is_an_error_not_a_skip() -> None:
    done = _run_with_plugins("sweeper.no_such_module:register")
    assert done.returncode != 0
    assert "$SWEEPER_PLUGINS: cannot load 'sweeper.no_such_module:register'" in done.stderr


def test_what_a_task_does_not_read_is_reported_by_field(tmp_path: Path) -> None:
    raw = minimal_spec()
    raw["task"] = "causal_lm"
    raw["grid"] = {"framework": ["fairseq"]}
    raw["data"] = {"dir": "data", "format": "csv", "files": {s: f"{s}.csv" for s in SPLITS}}
    raw["model"] = {**raw["model"], "tokenizer": {"train": {"vocab_size": 60}}}
    del raw["model"]["sentencepiece"], raw["model"]["dictionary"]
    with pytest.raises(SpecError) as caught:
        validate_mapping(raw, "s.yaml", tmp_path)
    assert [str(p) for p in caught.value.problems] == [
        "s.yaml: grid.framework.0: causal_lm has no fairseq backend (it runs on hf)",
        "s.yaml: data.format: task causal_lm reads data.format lines only (got 'csv')",
        "s.yaml: model.tokenizer: task causal_lm does not train a tokenizer: give "
        "model.sentencepiece and model.dictionary",
    ]
