"""The sweep's input fingerprint: what changes it, what is compared, and the summary."""

from __future__ import annotations

import json

from sweeper.spec.load import validate_mapping
from sweeper.summarize.sweep_runs import _same_inputs
from sweeper.tracking.inputs import MISSING, changed, inputs_fingerprint
from tests.support.specs import minimal_spec


def _fingerprint(tmp_path, **changes) -> dict[str, str]:
    raw = minimal_spec()
    for dotted, value in changes.items():
        block, _, name = dotted.partition("__")
        raw.setdefault(block, {})[name] = value
    return inputs_fingerprint(validate_mapping(raw, "spec.yaml", base_dir=tmp_path))


def test_arch_and_pretrained_change_the_fingerprint_seeds_do_not(tmp_path):
    base = _fingerprint(tmp_path)
    assert set(base) >= {"model.arch", "data"}
    assert _fingerprint(tmp_path, grid__seed=[7, 8]) == base  # new seeds: same inputs
    arch = {**minimal_spec()["model"]["arch"], "layers": 3}
    assert changed(base, _fingerprint(tmp_path, model__arch=arch)) == ["model.arch"]


def test_missing_parts_are_not_compared():
    assert changed({"data": MISSING, "model.arch": "a"}, {"data": "d", "model.arch": "a"}) == []
    assert changed({"data": "x"}, {"data": "y", "pretrained": "p"}) == ["data"]
    assert changed({}, {"data": "y"}) == []  # runs recorded before the tag existed


def test_summary_leaves_out_runs_made_from_other_inputs():
    from test_summarize_budget import _run

    ours, theirs = _run("hf/random/full", 1, "grid"), _run("hf/random/full", 2, "grid")
    ours = type(ours)(**{**ours.__dict__, "inputs": json.dumps({"model.arch": "a"})})
    theirs = type(theirs)(**{**theirs.__dict__, "inputs": json.dumps({"model.arch": "b"})})
    kept, out = _same_inputs([ours, theirs], {"model.arch": "a"})
    assert kept == [ours]
    (item,) = out
    assert item.reason == "made from other inputs than the spec's: model.arch differ"
    assert _same_inputs([ours, theirs], None) == ([ours, theirs], [])


def test_a_changed_review_or_checkpoint_changes_its_part(tmp_path):
    for split in ("train", "valid", "test"):
        (tmp_path / "data").mkdir(exist_ok=True)
        (tmp_path / "data" / f"{split}.review").write_text("good film\nbad film\n")
        (tmp_path / "data" / f"{split}.label").write_text("1\n0\n")
    (tmp_path / "m").mkdir()
    for name in ("sp.model", "dict.txt", "model.pt"):
        (tmp_path / "m" / name).write_bytes(name.encode())
    before = _fingerprint(tmp_path)
    assert MISSING not in before.values()
    (tmp_path / "data" / "train.review").write_text("good film\nawful film\n")
    after_review = _fingerprint(tmp_path)
    assert changed(before, after_review) == ["data"]
    (tmp_path / "m" / "model.pt").write_bytes(b"other weights")
    assert changed(after_review, _fingerprint(tmp_path)) == ["pretrained"]


def test_summary_notes_counted_trials_that_ran_on_other_package_versions():
    from test_summarize_budget import _run

    from sweeper.summarize.core import _mixed_versions

    runs = [_run("hf/random/full", seed, "grid") for seed in (1, 2, 3, 4)]
    stacks = ["{}", '{"peft":"1","torch":"2.12.0"}', '{"peft":"1","torch":"2.13.0"}',
              '{"peft":"1","torch":"2.13.0"}']  # fmt: skip  # "{}": a version-1 run, upgraded
    runs = [type(r)(**{**r.__dict__, "versions": v}) for r, v in zip(runs, stacks, strict=True)]
    assert _mixed_versions(runs) == [
        "counted trials ran with different torch versions: 2.12.0 (1 run(s)), 2.13.0 (2 run(s))"
    ]
    assert _mixed_versions(runs[2:]) == []  # one stack: nothing to say
