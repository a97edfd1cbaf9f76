"""A finished sweep resumed with other inputs is refused, and not summarised as its own.

A 2-trial dummy sweep finishes; then `sweeper run SPEC --resume` with a changed model
architecture, a changed review line, or a changed pretraining recipe must each exit 2
naming what changed, before anything is prepared, trained or recorded; `summarize` of
the changed spec must not count the old trials as its results. Adding a seed is still
a valid resume.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.reliability import record
from tests.support.sweeps import new_sweep, run_sweeper, runs_by_role, shared

pytestmark = pytest.mark.integration


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_resume_with_other_inputs_exits_2_naming_them(tmp_path, tmp_path_factory):
    corpus = tmp_path / "corpus"  # a copy this test may edit
    shutil.copytree(shared(tmp_path_factory)["corpus"], corpus)
    model = {"sentencepiece": str(corpus / "sentencepiece.bpe.model"),
             "dictionary": str(corpus / "dict.txt")}  # fmt: skip
    spec, out = new_sweep(
        tmp_path, tmp_path_factory, "inputs", data={"dir": str(corpus)}, model=model
    )
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    before = {r.info.run_id for r in runs_by_role(out, "inputs")[1]}

    refusals = {}
    for what, change, edit in (
        ("model.arch", ["model.arch.layers=2"], None),
        ("pretrained", ["model.pretrain.steps=5"], None),
        ("data", [], corpus / "train.review"),
    ):
        original = edit.read_text(encoding="utf-8") if edit else None
        if edit:
            lines = original.split("\n")
            edit.write_text("\n".join(["a changed review", *lines[1:]]), encoding="utf-8")
        refused = run_sweeper("run", spec, *change, "--resume", timeout=120)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"{what} changed since its runs were made" in refused.stderr
        assert "started" not in refused.stdout and "prepar" not in refused.stdout
        refusals[what] = refused.returncode
        if what == "model.arch":  # the old trials are not this spec's results
            report = run_sweeper("summarize", spec, *change, "--format", "json", "--no-log")
            summary = json.loads(report.stdout)
            assert summary["trials"] == []
            reasons = {n["reason"] for n in summary["not_counted"]}
            assert reasons == {"made from other inputs than the spec's: model.arch differ"}
        if edit:
            edit.write_text(original, encoding="utf-8")
    assert {r.info.run_id for r in runs_by_role(out, "inputs")[1]} == before  # nothing new

    more = run_sweeper("run", spec, "grid.seed=[1,2,3]", "--resume")  # a new seed: fine
    assert more.returncode == 0, more.stderr[-3000:]
    assert len(runs_by_role(out, "inputs")[1]) == 3
    record(
        "e2. `--resume` with changed inputs",
        "after a finished 2-trial sweep: --resume with model.arch.layers=2, with "
        "model.pretrain.steps=5, and with one review line changed",
        f"exit codes {refusals}, each naming the change, no run created or trained; "
        "summarize of the changed spec counts none of the old trials; --resume adding "
        "a seed: exit 0, 3 runs",
    )
