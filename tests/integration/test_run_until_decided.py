"""`sweeper run --until-decided`: seeds are added only where a comparison is open.

On the demo data with real fairseq and HF trials (1 epoch), pretrained vs random is
decided and fairseq vs HF (same weights, same ids) ends with the interval that says
why. With the dummy trainer, the saving, equivalence, the recorded plan and the
resume; and a fixed-seed sweep that keeps the fixed-n table.

Real CLI, real Ray and MLflow; the dummy trainer makes the outcome known in advance:
its accuracy ignores a learning rate below 0.01 and loses 20 points at 0.1, and each
trial is shifted by its own fixed noise (see NOISE). The decisions are the recorded
plan's group-sequential rule's (`sweeper.summarize.group_sequential`), read at the look
that made them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from sweeper import record_names
from tests.support.sweeps import history, logged_summary, new_sweep, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration

LRS = ("0.001", "0.002", "0.1")
DEMO = Path(__file__).resolve().parents[2] / "sweeps" / "demo.yaml"


@pytest.mark.soak
def test_demo_data_decides_init_and_ends_framework_with_its_interval(tmp_path):
    """Several minutes (`make reliability`): the demo corpus, 2,000 pretraining steps,
    up to 36 one-epoch trials.

    One epoch at the demo's lr 3e-5 leaves pretrained within reach of random at 3 seeds;
    at 1e-4 one epoch separates them, which is what this test needs. At 3 seeds no
    comparison of a family of four is decided (the plan's first look spends almost none
    of alpha: t on 2 df must pass about 480), so every group gets seeds 4-6; by 9 pairs
    pretrained vs random is decided in both frameworks. Each fairseq - hf comparison ends, with
    --margin 3, as its interval says: equivalent (inside ±3), better (excludes 0) or
    undecided (holds 0 and reaches past ±3).
    """
    pytest.importorskip("fairseq")
    (tmp_path / "sweeps").mkdir()
    spec = shutil.copy(DEMO, tmp_path / "sweeps" / "demo.yaml")  # outputs: tmp_path/runs
    done = run_sweeper(
        "run", spec, "name=decide", "train.epochs=1", "train.lr=1e-4",
        "--until-decided", "--max-seeds", "9", "--margin", "3",
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "0 of 4 comparisons decided" in done.stdout
    assert "adding seeds 4, 5, 6 to 4 group(s): 12 trials" in done.stdout
    ran = re.search(
        r"trials run: (\d+); every group to --max-seeds 9 would have run 36", done.stdout
    )
    assert ran and 24 <= int(ran.group(1)) <= 36, done.stdout[-3000:]

    report = run_sweeper("summarize", spec, "name=decide", "--format", "json", "--no-log")
    comparisons = json.loads(report.stdout)["comparisons"]
    by_axis: dict[str, list[dict]] = {}
    for c in comparisons:
        by_axis.setdefault(c["axis"], []).append(c)
    assert [c["decision"] for c in by_axis["init"]] == [
        "fairseq/pretrained/full better",
        "hf/pretrained/full better",
    ]
    assert all(c["look"] in (2, 3) and c["decision_low"] > 0 for c in by_axis["init"])
    for c in by_axis["framework"]:
        low, high = c["decision_low"], c["decision_high"]
        if c["decision"] == "equivalent within ±3":
            assert -3 < low <= high < 3
        elif c["decision"].endswith("better"):
            assert low > 0 or high < 0
        else:
            assert c["decision"] == "undecided" and c["look"] == 3
            assert low is None or (low <= 0 <= high and (low <= -3 or high >= 3))
    assert all(c["paired"] for c in comparisons)
    out = tmp_path / "runs" / "demo"
    keys = [t.data.tags[record_names.TAG_TRIAL_KEY] for t in runs_by_role(out, "decide")[1]]
    assert len(keys) == len(set(keys)) == int(ran.group(1))


NOISE = {"*": {"noise": 0.5}}
"""Each dummy trial's curve shifted by 0.5 × its own fixed normal draw: seed differences
between two groups get a spread (sd ~0.7), as real trials' do."""


def test_seeds_go_only_to_undecided_groups(tmp_path, tmp_path_factory):
    """Grid lr [0.001, 0.002, 0.1] over seeds 1-4, +2 seeds per look up to 6, margin 3.

    The two comparisons with lr 0.1 (20 points worse) are decided at the first look;
    0.001 vs 0.002 (no difference but the noise) is not, at 4 pairs and the family's
    level 0.05/3, so seeds 5-6 go to those two groups only, where the interval then
    lies inside ±3: "equivalent within ±2" at look 2. 16 trial keys instead of 18.
    """
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "decide",
        grid={"seed": [1, 2, 3, 4], "params": {"train.lr": [float(v) for v in LRS]}},
        train={"epochs": 1},
    )
    args = ("run", spec, "--until-decided", "--max-seeds", "6", "--seed-batch", "2")
    done = run_sweeper(*args, "--margin", "2", extra=NOISE)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "plan: 4 seeds, then +2 per look up to 6 (looks at 4, 6)" in done.stdout
    assert "2 of 3 comparisons decided" in done.stdout
    assert "adding seeds 5, 6 to 2 group(s): 4 trials" in done.stdout
    assert "--until-decided stopped: every comparison is decided" in done.stdout
    assert "trials run: 16; every group to --max-seeds 6 would have run 18" in done.stdout
    assert "--until-decided spent: " in done.stdout
    assert "--until-decided saved against every group at --max-seeds 6: 2 trials, about " in (
        done.stdout
    )

    parents, trials = runs_by_role(out, "decide")
    assert len(parents) == 1
    plan = json.loads(parents[0].data.tags[record_names.TAG_SEQUENTIAL_PLAN])
    assert (plan["start"], plan["batch"], plan["max_seeds"], plan["margin"]) == (4, 2, 6, 2.0)
    keys = [t.data.tags[record_names.TAG_TRIAL_KEY] for t in trials]
    assert len(keys) == len(set(keys)) == 16  # one run per key
    seeds: dict[str, set[int]] = {}
    for run in trials:
        assert run.info.status == "FINISHED"
        lr = run.data.params["train.lr"]
        seeds.setdefault(lr, set()).add(int(run.data.tags[record_names.TAG_SEED]))
    assert seeds == {"0.001": set(range(1, 7)), "0.002": set(range(1, 7)), "0.1": {1, 2, 3, 4}}

    report = run_sweeper("summarize", spec, "--format", "json", "--no-log")
    summary = json.loads(report.stdout)
    assert summary["plan"] == plan  # the summary decides by the recorded plan
    # The loop's closing report went through the same front door, with the same
    # request: it is this summary, plus the driver's lines on why the loop stopped.
    closing = logged_summary(out, parents[0].info.run_id)
    driver = [n for n in closing["notes"] if n.startswith(("--until-decided", "trials run:"))]
    assert len(driver) == 4 and closing == {**summary, "notes": summary["notes"] + driver}
    decisions = {c["kind"]: c for c in summary["comparisons"]}
    for kind in ("train.lr=0.001 - train.lr=0.1", "train.lr=0.002 - train.lr=0.1"):
        c = decisions[kind]
        assert c["decision"].endswith("] better") and "lr=0.1]" not in c["decision"]
        assert (c["rule"], c["look"], c["n_decision"], c["p_holm"]) == (
            "group-sequential",
            1,
            4,
            None,
        )
        assert c["decision_low"] > 0  # the interval says why: it excludes 0
    same = decisions["train.lr=0.001 - train.lr=0.002"]
    assert same["decision"] == "equivalent within ±2" and (same["look"], same["n_decision"]) == (
        2,
        6,
    )
    assert -2 < same["decision_low"] <= same["decision_high"] < 2
    text = run_sweeper("summarize", spec, "--no-log").stdout
    assert "p (fixed-n, not for decisions)" in text and "group-sequential" in text

    again = run_sweeper(*args, "--margin", "2", "--resume", extra=NOISE)  # nothing left to run
    assert again.returncode == 0, again.stderr[-3000:]
    assert "adding seeds" not in again.stdout
    assert "trials run: 16;" in again.stdout
    other = run_sweeper(*args, "--resume", extra=NOISE)  # another plan: no margin
    assert other.returncode == 2, other.stdout[-2000:]
    assert "margin: 2.0 -> None" in other.stderr
    assert len(runs_by_role(out, "decide")[1]) == 16
    more = ("run", spec, "--until-decided", "--max-seeds", "8", "--seed-batch", "2")
    raised = run_sweeper(*more, "--margin", "2", "--resume", extra=NOISE)  # may rise
    assert raised.returncode == 0, raised.stderr[-3000:]
    assert "past the recorded plan's 6 seeds (to 8)" in raised.stdout
    assert "adding seeds" not in raised.stdout  # every comparison was decided already
    extended = json.loads(
        runs_by_role(out, "decide")[0][0].data.tags[record_names.TAG_SEQUENTIAL_PLAN]
    )
    assert (extended["max_seeds"], extended["extended_to"]) == (6, 8)


def test_a_fixed_seed_sweep_keeps_the_fixed_n_table(tmp_path, tmp_path_factory):
    """Without --until-decided the record holds no plan and the summary decides by
    Holm on the fixed-n p, as before: the 20-point lr comparisons are decided, with the
    exact sign-flip p beside (three pairs: 0.25, which only a tie would need)."""
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "fixed",
        grid={"seed": [1, 2, 3], "params": {"train.lr": [0.001, 0.1]}},
        train={"epochs": 1},
        cost={"cpu_hour": 0.5, "currency": "EUR"},
    )
    done = run_sweeper("run", spec, extra=NOISE)
    assert done.returncode == 0, done.stderr[-3000:]
    parents, _ = runs_by_role(out, "fixed")
    assert record_names.TAG_SEQUENTIAL_PLAN not in parents[0].data.tags
    summary = json.loads(run_sweeper("summarize", spec, "--format", "json", "--no-log").stdout)
    assert summary["plan"] is None
    assert logged_summary(out, parents[0].info.run_id) == summary  # the run printed the same
    (c,) = summary["comparisons"]
    assert c["rule"] == "Holm" and c["p_holm"] < 0.05 and c["decision"].endswith("] better")
    assert c["p_sign_flip"] == 0.25

    # At an alpha it cannot reach, the comparison is undecided and its seeds needed is
    # priced from the trials' recorded seconds: each group's held seconds per counted
    # trial, times the seeds it lacks.
    strict = run_sweeper("summarize", spec, "--format", "json", "--no-log", "--alpha", "1e-9")
    (c,) = json.loads(strict.stdout)["comparisons"]
    assert c["decision"] == "undecided" and c["seeds_needed"] > 3, c
    held: dict[str, float] = {}
    for run in runs_by_role(out, "fixed")[1]:
        group = run.data.tags[record_names.TAG_GROUP]
        attempts = history(out, run.info.run_id, record_names.METRIC_ATTEMPT_CPU)
        held[group] = held.get(group, 0.0) + sum(v for _, v in attempts)
    more = c["seeds_needed"] - 3
    seconds = more * (held[c["group_a"]] + held[c["group_b"]]) / 3  # 3 counted per group
    assert c["needed_trials"] == 2 * more
    assert c["needed_cpu_hours"] == pytest.approx(seconds / 3600)
    assert c["needed_cost"] == pytest.approx(0.5 * seconds / 3600) and c["currency"] == "EUR"
    assert c["needed_gpu_hours"] is None
    text = run_sweeper("summarize", spec, "--no-log", "--alpha", "1e-9").stdout
    assert f"{c['seeds_needed']} (+{2 * more} trials, " in text and " EUR)" in text
