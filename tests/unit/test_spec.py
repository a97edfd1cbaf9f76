"""The sweep file is validated like a compiler validates code: every error, located."""

from __future__ import annotations

import os

import pytest

from sweeper.cli.main import main
from sweeper.spec.load import SpecError, check_files, load_spec
from tests.support.specs import minimal_spec


def _set(spec: dict, dotted: str, value) -> dict:
    node = spec
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return spec


def _drop(spec: dict, dotted: str) -> dict:
    node = spec
    *parents, last = dotted.split(".")
    for part in parents:
        node = node[part]
    del node[last]
    return spec


# (description, mutation, field path the message must name, words it must contain)
MALFORMED = [
    ("missing name", lambda s: _drop(s, "name"), "name", "required"),
    ("bad name", lambda s: _set(s, "name", "has space"), "name", "pattern"),
    ("unknown top key", lambda s: _set(s, "retires", 3), "retires", "did you mean 'retries'"),
    ("unknown nested key", lambda s: _set(s, "train.lrr", 1), "train.lrr", "did you mean 'lr'"),
    ("epochs not int", lambda s: _set(s, "train.epochs", "five"), "train.epochs", "integer"),
    ("epochs zero", lambda s: _set(s, "train.epochs", 0), "train.epochs", "greater than"),
    ("negative lr", lambda s: _set(s, "train.lr", -1e-5), "train.lr", "greater than"),
    ("warmup >= 1", lambda s: _set(s, "train.warmup_ratio", 1.5), "train.warmup_ratio", "less"),
    (
        "bad scheduler",
        lambda s: _set(s, "train.lr_scheduler", "cosine"),
        "train.lr_scheduler",
        "polynomial",
    ),
    ("bad framework", lambda s: _set(s, "grid.framework", ["tf"]), "grid.framework.0", "fairseq"),
    ("bad init", lambda s: _set(s, "grid.init", ["pre"]), "grid.init.0", "pretrained"),
    ("empty seeds", lambda s: _set(s, "grid.seed", []), "grid.seed", "at least 1"),
    ("seed not int", lambda s: _set(s, "grid.seed", ["a"]), "grid.seed.0", "integer"),
    (
        "heads do not divide",
        lambda s: _set(s, "model.arch.heads", 3),
        "model.arch",
        "not divisible",
    ),
    (
        "missing arch field",
        lambda s: _drop(s, "model.arch.max_positions"),
        "model.arch.max_positions",
        "required",
    ),
    (
        "misspelt arch field",
        lambda s: _set(s, "model.arch.max_positon", 5),
        "model.arch.max_positon",
        "did you mean 'max_positions'",
    ),
    ("bad data source", lambda s: _set(s, "data.source", "s3"), "data.source", "files"),
    (
        "generated without settings",
        lambda s: _set(s, "data.source", "generated"),
        "data",
        "generate",
    ),
    ("negative gpu", lambda s: _set(s, "resources.gpu", -1), "resources.gpu", "greater"),
    ("zero concurrency", lambda s: _set(s, "max_concurrent", 0), "max_concurrent", "greater"),
    (
        "checkpoint and pretrain",
        lambda s: _set(s, "model.pretrain", {"steps": 10}),
        "model",
        "either",
    ),
    ("pretrained without source", lambda s: _drop(s, "model.checkpoint"), "<top level>", "neither"),
    (
        "unknown grid param",
        lambda s: _set(s, "grid.params", {"train.lrate": [1]}),
        "grid",
        "did you mean 'train.lr'",
    ),
    (
        "search bad bounds",
        lambda s: _set(
            s, "search", {"space": {"train.lr": {"type": "loguniform", "low": 1e-3, "high": 1e-5}}}
        ),
        "search.space.train.lr",
        "low",
    ),
    (
        "confirm on a tuning seed",
        lambda s: _set(
            s, "search", {"space": {"train.lr": {"type": "uniform", "low": 0, "high": 1}}}
        ),
        "<top level>",
        "repeats tuning seed(s) [1]",
    ),
    ("lora bad bias", lambda s: _set(s, "lora.bias", "some"), "lora.bias", "none"),
    (
        "betas wrong length",
        lambda s: _set(s, "train.adam_betas", [0.9]),
        "train.adam_betas.1",
        "list too short",
    ),
]


@pytest.mark.parametrize(
    ("what", "mutate", "field", "words"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_spec_exits_2_naming_the_field(write_spec, capsys, what, mutate, field, words):
    path = write_spec(mutate(minimal_spec()))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    line = next((ln for ln in err.splitlines() if f"{path}: {field}:" in ln), None)
    assert line is not None, f"no message names {field!r}:\n{err}"
    assert words.lower() in line.lower(), line


@pytest.mark.parametrize(
    "overrides",
    [["train.precision=fp16"], ["grid.params={train.precision: [fp32, fp16]}"]],
)
def test_fp16_without_a_gpu_is_refused(write_spec, overrides):
    path = write_spec(minimal_spec())
    with pytest.raises(SpecError, match="fp16 runs on CUDA only"):
        load_spec(path, overrides)
    spec = load_spec(path, [*overrides, "resources.gpu=1"])
    assert "fp16" in {spec.train.precision, *spec.grid.params.get("train.precision", [])}
    assert load_spec(path, ["train.precision=bf16"]).train.precision == "bf16"


def test_seed_overlap_is_allowed_when_said(write_spec):
    search = {"space": {"train.lr": {"type": "uniform", "low": 0, "high": 1}}}
    assert main(["validate", str(write_spec(_set(minimal_spec(), "search", search)))]) == 2
    allowed = _set(minimal_spec(), "search", {**search, "allow_seed_overlap": True})
    assert main(["validate", str(write_spec(allowed))]) == 0
    disjoint = _set(_set(minimal_spec(), "search", search), "grid.seed", [2, 3])
    assert main(["validate", str(write_spec(disjoint))]) == 0


def test_all_errors_reported_at_once(write_spec):
    spec = _set(_set(_set(minimal_spec(), "train.epochs", 0), "grid.seed", []), "oops", 1)
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(spec))
    fields = {p.field for p in exc.value.problems}
    assert {"train.epochs", "grid.seed", "oops"} <= fields


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "mapping"),
        ("name: !!python/object:os.system x", "not valid YAML"),
    ],
)
def test_unparseable_files(write_spec, text, words):
    with pytest.raises(SpecError, match=words):
        load_spec(write_spec(text))


def test_missing_file_is_reported(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_relative_paths_resolve_against_the_spec_folder(write_spec, tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    spec = load_spec(write_spec(minimal_spec()))
    assert spec.data.dir == (tmp_path / "data").resolve()
    assert spec.model.dictionary == (tmp_path / "m" / "dict.txt").resolve()
    assert spec.output_dir == (tmp_path / "out").resolve()


def test_env_interpolation(write_spec, monkeypatch):
    spec = _set(minimal_spec(), "tracking.uri", "${SWEEPER_TEST_URI}")
    path = write_spec(spec)
    monkeypatch.setenv("SWEEPER_TEST_URI", "http://127.0.0.1:5000")
    assert load_spec(path).tracking.uri == "http://127.0.0.1:5000"
    monkeypatch.delenv("SWEEPER_TEST_URI")
    with pytest.raises(SpecError, match=r"tracking\.uri: environment variable SWEEPER_TEST_URI"):
        load_spec(path)


def test_env_default_and_empty_means_default(write_spec, monkeypatch):
    monkeypatch.delenv("SWEEPER_UNSET", raising=False)
    path = write_spec(_set(minimal_spec(), "tracking.uri", "${SWEEPER_UNSET:-}"))
    assert load_spec(path).tracking.uri is None


def test_overrides(write_spec):
    path = write_spec(minimal_spec())
    spec = load_spec(path, ["train.epochs=1", "grid.seed=[1]", "grid.framework=[hf]"])
    assert spec.train.epochs == 1
    assert spec.grid.seed == [1]
    assert spec.grid.framework == ["hf"]


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        ("train.epoch=1", "train.epoch", "did you mean 'epochs'"),
        ("train.epochs", "train.epochs", "field.path=value"),
        ("name.x=1", "name.x", "not a mapping"),
        ("train.epochs=[1]", "train.epochs", "integer"),
    ],
)
def test_bad_overrides(write_spec, override, field, words):
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec(minimal_spec()), [override])
    assert any(p.field == field and words in p.message for p in exc.value.problems), (
        exc.value.problems
    )


def test_strict_reports_missing_files(write_spec, tmp_path):
    path = write_spec(minimal_spec())
    problems = check_files(load_spec(path), str(path))
    assert {p.field for p in problems} >= {
        "data.dir",
        "model.sentencepiece",
        "model.dictionary",
        "model.checkpoint",
    }
    (tmp_path / "m").mkdir()
    for name in ("sp.model", "dict.txt", "model.pt"):
        (tmp_path / "m" / name).write_text("x")
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "valid", "test"):
        for suffix in ("review", "label"):
            (data / f"{split}.{suffix}").write_text("x\n")
    assert check_files(load_spec(path), str(path)) == []


def test_validate_strict_exit_code(write_spec, capsys):
    path = write_spec(minimal_spec())
    assert main(["validate", str(path)]) == 0
    assert main(["validate", "--strict", str(path)]) == 2
    assert "model.checkpoint: file not found" in capsys.readouterr().err


def test_yaml_is_safe_loaded(write_spec, tmp_path):
    marker = tmp_path / "pwned"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(SpecError):
        load_spec(write_spec(text))
    assert not os.path.exists(marker)


@pytest.mark.parametrize(
    ("select", "words"),
    [
        (
            {"metric": "valid_f1"},
            "the validation metrics that exist: valid_loss, valid_accuracy, valid_macro_f1",
        ),
        (
            {"report": ["test_bleu"]},
            "the test metrics that exist: test_loss, test_accuracy, test_macro_f1",
        ),
    ],
)
def test_a_select_metric_no_trainer_reports_exits_2_naming_those_that_exist(
    write_spec, capsys, select, words
):
    path = write_spec(_set(minimal_spec(), "select", select))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: select:" in err and words in err, err


def test_select_mode_defaults_to_the_metric_direction(write_spec):
    from sweeper.selection import Selection

    path = write_spec(minimal_spec())
    assert Selection.of(load_spec(path).select).is_default()
    loss = Selection.of(load_spec(path, ["select.metric=valid_loss"]).select)
    assert (loss.metric, loss.mode, loss.report) == ("valid_loss", "min", ("test_accuracy",))
    forced = load_spec(path, ["select={metric: valid_loss, mode: max}"]).select
    assert Selection.of(forced).mode == "max"


def test_a_sweep_may_select_and_report_macro_f1(write_spec, tmp_path):
    """Macro-F1 is a classification measurement, best when highest; the trainers are
    told to keep their best checkpoint by it (`TrialJob.selected`)."""
    from sweeper.selection import Selection
    from sweeper.trainers.base import TrialJob
    from sweeper.trainers.classification import select_extra

    path = write_spec(minimal_spec())
    spec = load_spec(path, ["select={metric: valid_macro_f1, report: [test_macro_f1]}"])
    assert Selection.of(spec.select) == Selection("valid_macro_f1", "max", ("test_macro_f1",))
    extra = select_extra(spec)
    assert extra == {"select": {"metric": "valid_macro_f1", "mode": "max"}}
    job = TrialJob(
        framework="hf", seed=1, init="random", method="full", train={}, lora=None, arch={},
        num_classes=3, num_train=1, data="", init_checkpoint="",
        out_dir=str(tmp_path), extra=extra,
    )  # fmt: skip
    assert job.selected == ("macro_f1", "max")
    assert select_extra(load_spec(path)) == {}  # a default sweep's job holds no selection
    assert TrialJob(**{**job.__dict__, "extra": {}}).selected == ("accuracy", "max")
