"""Rendering: every format shows the same records; undefined values never print as nan."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys

import pytest

from sweeper.summarize.compare import compare
from sweeper.summarize.decide import decide
from sweeper.summarize.records import CountedTrial, RunRecord, Summary
from sweeper.summarize.report import group_metrics, metric_name, write_report
from sweeper.summarize.select import left_out
from sweeper.summarize.stats import group_stats
from sweeper.summarize.tables import (
    build_tables,
    table_csv,
    to_csv,
    to_json,
    to_markdown,
)
from sweeper.summarize.terminal import print_rich, to_plain


def trial(group: str, seed: int, test: float, step: int = 225) -> CountedTrial:
    framework, init, rest = group.split("/", 2)
    method, _, variant = rest.partition("[")
    return CountedTrial(
        run_id=f"run{seed:02d}{group.replace('/', '')}",
        run_name=f"{framework}-{init}-s{seed}",
        trial_key=f"key{seed}",
        group=group,
        framework=framework,
        init=init,
        method=method,
        variant=variant.removesuffix("]"),
        seed=seed,
        best_valid=test + 1.5,
        best_step=step,
        best_epoch=step / 225,
        test_value=test,
        wall_time=12.345,
        trainable_params=1_234_567,
        valid_curve=((step - 10, test - 3), (step, test + 1.5), (step + 10, test)),
    )


def failed_run(n: int) -> RunRecord:
    return RunRecord(
        run_id=f"{n:032d}",
        run_name="x",
        parent_run_id=None,
        mlflow_status="FAILED",
        start_time=None,
        end_time=None,
        role="trial",
        sweep="demo",
        trial_key=f"kf{n}",
        group="hf/random/full",
        seed=n,
        init="random",
        framework="hf",
        method="full",
        stage=None,
        status="failed",
        error=None,
        trainable_params=None,
    )


def make_summary(not_counted: int = 1) -> Summary:
    trials = [
        trial("fairseq/pretrained/full", 1, 79.9, 1125),
        trial("fairseq/pretrained/full", 2, 78.5, 675),
        trial("fairseq/pretrained/full", 3, 80.1, 900),
        trial("fairseq/random/full", 1, 65.4, 900),
        trial("hf/pretrained/lora[lora.r=8]", 1, 70.0, 450),  # n = 1, a variant group
    ]
    groups = group_stats(trials)
    return Summary(
        experiment="demo",
        experiment_id="1",
        tracking_uri="sqlite:///x.db",
        sweep="demo",
        parent_run_id="p" * 32,
        trials=trials,
        groups=groups,
        comparisons=decide(compare(groups, trials), trials),
        not_counted=[left_out(failed_run(i), "failed | crashed") for i in range(not_counted)],
        notes=["a note"],
    )


def test_tables_show_the_records():
    table1, table2, comparisons, not_counted = build_tables(make_summary())
    assert [c.header for c in table1.columns] == [
        "Group",
        "Seed",
        "Precision",
        "Valid acc",
        "Step",
        "Epoch",
        "Test acc",
        "Wall time (s)",
        "Run",
    ]
    assert table1.text_rows()[0] == [
        "fairseq/pretrained/full",
        "1",
        "fp32",
        "81.40",
        "1125",
        "5",
        "79.90",
        "12.3",
        "run01fai",
    ]
    assert table1.text_rows()[1][5] == "3"
    assert "Std (ddof=1)" in [c.header for c in table2.columns]
    assert table2.text_rows()[0][:9] == [
        "fairseq/pretrained/full",
        "3",
        "79.50",
        "0.87",
        "[77.33, 81.67]",
        "needs n >= 21",
        "78.50",
        "80.10",
        "900",
    ]
    assert table2.text_rows()[0][9] == "1,234,567"
    assert table2.text_rows()[1][3:5] == ["n/a", "n/a"]  # fairseq/random: n = 1
    assert comparisons.text_rows()[0][:18] == [
        "init",
        "pretrained - random",
        "fairseq/full",
        "3/1",
        "+14.10",
        "n/a",
        "n/a",
        "Welch t",
        "n/a",  # p
        "n/a",  # Wilcoxon: unpaired
        "n/a",  # Holm
        "n/a",  # exact sign-flip p: unpaired
        "n/a",  # decision interval: n = 1 in a group
        "undecided",
        "n/a",  # equivalent within
        "n/a",  # P(A>B): unpaired
        "n/a",  # d_z
        "n/a",  # seeds needed
    ]
    assert not_counted.text_rows() == [["00000000", "hf/random/full", "0", "failed | crashed"]]


def test_markdown_escapes_pipes_and_aligns_numbers():
    text = to_markdown(make_summary())
    assert "| Group | Seed | Precision | Valid acc |" in text
    assert "|---|---:|---|---:|" in text
    assert "failed \\| crashed" in text
    assert "| hf/pretrained/lora[lora.r=8] | 1 | 70.00 | n/a | n/a |" in text
    assert "nan" not in text.lower()


def test_csv_has_full_precision_and_blanks_for_undefined():
    summary = make_summary()
    table2 = build_tables(summary)[1]
    rows = list(csv.DictReader(io.StringIO(table_csv(table2))))
    assert float(rows[0]["std"]) == pytest.approx(math.sqrt(0.76), rel=1e-12)
    assert rows[1]["std"] == "" and rows[1]["ci_low"] == ""
    assert rows[0]["seeds"] == "1;2;3"
    stream = to_csv(summary)
    assert [line for line in stream.splitlines() if line.startswith("# ")] == [
        "# table1",
        "# table2",
        "# comparisons",
        "# not_counted",
    ]


def test_json_is_strict_and_complete():
    data = json.loads(to_json(make_summary()))
    assert data["std"] == "sample standard deviation (ddof=1)"
    assert data["groups"][1]["std"] is None
    assert data["comparisons"][0]["p_value"] is None
    assert data["trials"][0]["test_accuracy"] == 79.9 and "valid_curve" not in data["trials"][0]
    assert len(data["not_counted"]) == 1


def test_terminal_lists_at_most_20_not_counted():
    summary = make_summary(not_counted=25)
    text = to_plain(summary)
    assert "Not counted (25 runs)" in text
    assert "... and 5 more (all in --format json or --out)" in text
    assert "note: a note" in text
    buffer = io.StringIO()
    print_rich(summary, buffer, width=250)
    rich_text = buffer.getvalue()
    assert "hf/pretrained/lora[lora.r=8]" in rich_text  # brackets are not rich markup
    assert "... and 5 more" in rich_text


def test_metric_names_are_valid_for_mlflow():
    assert metric_name("summary", "hf/pretrained/lora[lora.r=8,train.lr=1e-05]", "n") == (
        "summary/hf/pretrained/lora_lora.r_8_train.lr_1e-05_/n"
    )
    assert metric_name("summary", "a/../b//c", "x") == "summary/a/_/b/_/c/x"
    metrics = group_metrics(make_summary())
    assert metrics["summary/fairseq/pretrained/full/test_accuracy_mean"] == pytest.approx(79.5)
    assert "summary/fairseq/random/full/test_accuracy_std" not in metrics  # n = 1: no std
    assert all(math.isfinite(v) for v in metrics.values())


def test_write_report_files_and_figures(tmp_path):
    written = write_report(make_summary(), tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == sorted(
        [
            "summary.md",
            "summary.json",
            "summary.tex",
            "report.html",
            "curves.png",
            "test_accuracy.png",
            *(
                f"{t}.{s}"
                for t in ("table1", "table2", "comparisons", "not_counted")
                for s in ("md", "csv")
            ),
        ]
    )
    for png in ("curves.png", "test_accuracy.png"):
        assert (tmp_path / "out" / png).read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "out" / "table2.md").read_text().startswith("Table 2.")
    page = (tmp_path / "out" / "report.html").read_text()  # the one page the UI renders
    assert page.count("<table>") == 4 and page.count("data:image/png;base64,") == 2
    assert "<h2>Table 1." in page and "</html>" in page


def test_cli_help_teaches_and_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from sweeper.cli.main import main\n"
        "try:\n    main(['summarize', '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('mlflow', 'scipy', 'matplotlib', 'torch', 'ray')\n"
        "print('HEAVY', [m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "HEAVY []" in out
    assert "sweeper summarize --experiment demo --tracking-uri sqlite:///" in out
    assert "--format {terminal,markdown,csv,json,latex}" in out
