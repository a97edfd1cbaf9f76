"""`extends:`: a sweep built on another, merged as documented in sweeper.spec.extends."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
import yaml

from sweeper.cli.main import main
from sweeper.spec import schema as spec_module
from sweeper.spec import strict
from sweeper.spec.extends import PATH_FIELDS, spec_files
from sweeper.spec.load import SpecError, load_spec
from tests.support.specs import SWEEPS, minimal_spec


def _write(path: Path, mapping: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(mapping), encoding="utf-8")
    return path


def test_mappings_merge_and_lists_replace(tmp_path):
    base = minimal_spec()
    base["train"] = {"epochs": 5, "lr": 1e-4, "batch_size": 8}
    base["grid"] = {"seed": [1, 2, 3], "init": ["pretrained", "random"]}
    _write(tmp_path / "base.yaml", base)
    child = _write(
        tmp_path / "child.yaml",
        {"extends": "base.yaml", "name": "child", "train": {"lr": 1e-3}, "grid": {"seed": [7]}},
    )
    spec = load_spec(child)
    assert spec.name == "child"
    assert (spec.train.epochs, spec.train.lr, spec.train.batch_size) == (5, 1e-3, 8)
    assert spec.grid.seed == [7]  # replaced, not appended to
    assert spec.grid.init == ["pretrained", "random"]  # untouched sibling kept


def test_chains_apply_nearest_last(tmp_path):
    _write(tmp_path / "a.yaml", minimal_spec() | {"retries": 0, "max_concurrent": 1})
    _write(tmp_path / "b.yaml", {"extends": "a.yaml", "retries": 1, "max_concurrent": 2})
    c = _write(tmp_path / "c.yaml", {"extends": "b.yaml", "retries": 3})
    spec = load_spec(c)
    assert (spec.retries, spec.max_concurrent) == (3, 2)
    assert spec_files(c) == [
        c.resolve(),
        (tmp_path / "b.yaml").resolve(),
        (tmp_path / "a.yaml").resolve(),
    ]


def test_overrides_apply_after_the_chain(tmp_path):
    _write(tmp_path / "a.yaml", minimal_spec())
    b = _write(tmp_path / "b.yaml", {"extends": "a.yaml", "retries": 1})
    assert load_spec(b, ["retries=4"]).retries == 4


def test_paths_in_a_base_stay_relative_to_the_base(tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    _write(tmp_path / "bases" / "common.yaml", minimal_spec())
    child = _write(tmp_path / "variants" / "v.yaml", {"extends": "../bases/common.yaml"})
    spec = load_spec(child)
    assert spec.data.dir == (tmp_path / "bases" / "data").resolve()
    assert spec.model.checkpoint == (tmp_path / "bases" / "m" / "model.pt").resolve()
    moved = _write(
        tmp_path / "variants" / "w.yaml", {"extends": "../bases/common.yaml", "output_dir": "o"}
    )
    assert load_spec(moved).output_dir == (tmp_path / "variants" / "o").resolve()


def test_path_fields_list_matches_the_schema():
    """spec.extends names the spec's path fields by hand (it sits below the schema's layer);
    this walks the schema so that a new SpecPath field cannot be forgotten there."""

    def is_path(annotation) -> bool:
        if typing.get_origin(annotation) is typing.Annotated:
            return any(
                getattr(m, "func", None) is strict.resolve_path for m in annotation.__metadata__
            )
        return any(is_path(arg) for arg in typing.get_args(annotation))

    def walk(model, loc=()):
        for name, info in model.model_fields.items():
            annotation = info.rebuild_annotation()
            if is_path(annotation):
                yield (*loc, name)
            for arg in (annotation, *typing.get_args(annotation)):
                if isinstance(arg, type) and issubclass(arg, strict.Strict):
                    yield from walk(arg, (*loc, name))

    assert set(walk(spec_module.SweepSpec)) == set(PATH_FIELDS)


def test_a_cycle_exits_2_naming_the_chain(tmp_path, capsys):
    _write(tmp_path / "a.yaml", minimal_spec() | {"extends": "b.yaml"})
    _write(tmp_path / "b.yaml", {"extends": "c.yaml"})
    _write(tmp_path / "c.yaml", {"extends": "a.yaml"})
    assert main(["validate", str(tmp_path / "a.yaml")]) == 2
    err = capsys.readouterr().err
    assert "extends: `extends` makes a cycle: a.yaml -> b.yaml -> c.yaml -> a.yaml" in err


def test_self_extension_is_a_cycle(tmp_path):
    path = _write(tmp_path / "a.yaml", minimal_spec() | {"extends": "a.yaml"})
    with pytest.raises(SpecError, match=r"cycle: a\.yaml -> a\.yaml"):
        load_spec(path)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("missing.yaml", "base file not found"),
        (["a.yaml"], "must name one sweep file"),
        ("", "must name one"),
    ],
)
def test_bad_extends_names_the_field(tmp_path, value, words):
    path = _write(tmp_path / "x.yaml", minimal_spec() | {"extends": value})
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = info.value.problems
    assert (problem.field, str(tmp_path / "x.yaml")) == ("extends", problem.file)
    assert words in problem.message


def test_a_problem_in_a_base_names_the_base(tmp_path, monkeypatch):
    monkeypatch.delenv("SWEEPER_UNSET_X", raising=False)
    _write(tmp_path / "base.yaml", minimal_spec() | {"tracking": {"uri": "${SWEEPER_UNSET_X}"}})
    child = _write(tmp_path / "child.yaml", {"extends": str(tmp_path / "base.yaml")})
    with pytest.raises(SpecError) as info:
        load_spec(child)
    (problem,) = info.value.problems
    assert problem.file.endswith("base.yaml") and problem.field == "tracking.uri"


def test_validate_show_prints_the_resolved_spec(capsys):
    assert main(["validate", "--show", str(SWEEPS / "lora.yaml"), "grid.seed=[5]"]) == 0
    out = capsys.readouterr().out
    shown = yaml.safe_load(out.split("\n", 1)[1].rsplit("\n", 2)[0])
    assert shown["name"] == "demo-lora"
    assert shown["grid"]["seed"] == [5]
    assert shown["model"]["pretrain"]["steps"] == 2000  # from demo.yaml
    assert shown["train"]["epochs"] == 2 and shown["train"]["batch_size"] == 8
    assert "extends" not in shown


@pytest.mark.parametrize("name", ["lora.yaml", "search.yaml"])
def test_shipped_variants_extend_the_demo(name):
    variant, demo = load_spec(SWEEPS / name), load_spec(SWEEPS / "demo.yaml")
    assert spec_files(SWEEPS / name)[1:] == [(SWEEPS / "demo.yaml").resolve()]
    assert (variant.data, variant.model, variant.output_dir) == (
        demo.data,
        demo.model,
        demo.output_dir,
    )
