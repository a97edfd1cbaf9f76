"""The bench scripts' pure helpers: doc sections, ratios, interval rates, the bare
commands they time against, and their argument parsing. Nothing here is timed: the
benchmarks themselves run with `make bench`, never in the test suite."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sweeper.spec.model_block import ArchConfig
from sweeper.spec.train_block import TrainConfig
from sweeper.trainers.base import TrialJob
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.fairseq.fairseq_trainer import train_args

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_concurrency  # noqa: E402
import bench_frameworks  # noqa: E402
import bench_gpu_packing  # noqa: E402
import bench_overhead  # noqa: E402
import bench_stages  # noqa: E402
import bench_summarize  # noqa: E402
import common  # noqa: E402
import gpu_report  # noqa: E402
import gpu_trainers  # noqa: E402

DOC = "# Benchmarks\n\n## First\n\nold first\n\n## Second\n\nold second\n"


def test_replace_section_replaces_only_its_own_section():
    out = common.replace_section(DOC, "First", "## First\n\nnew first\n")
    assert out == "# Benchmarks\n\n## First\n\nnew first\n\n## Second\n\nold second\n"
    out = common.replace_section(DOC, "Second", "## Second\n\nnew second")
    assert out == "# Benchmarks\n\n## First\n\nold first\n\n## Second\n\nnew second\n"


def test_replace_section_appends_a_new_section_and_matches_whole_titles():
    out = common.replace_section(DOC, "Fir", "## Fir\n\nother\n")
    assert out == DOC + "\n## Fir\n\nother\n"
    assert common.replace_section("", "A", "## A\n\nx\n") == "## A\n\nx\n"


def test_write_section_creates_then_replaces(tmp_path: Path):
    doc = tmp_path / "docs" / "benchmarks.md"
    common.write_section("A", "## A\n\none\n", doc)
    common.write_section("B", "## B\n\ntwo\n", doc)
    common.write_section("A", "## A\n\nthree\n", doc)
    assert doc.read_text() == "# Benchmarks\n\n## A\n\nthree\n\n## B\n\ntwo\n"


def test_header_names_command_machine_and_load():
    lines = common.header("T", "python bench/x.py --quick", {"cpu": "test cpu"}, "0.10, 0.20, 0.30")
    text = "\n".join(lines)
    assert lines[0] == "## T"
    assert "`python bench/x.py --quick`" in text
    assert "- cpu: test cpu" in text
    assert "- load average at start (1, 5, 15 min): 0.10, 0.20, 0.30" in text
    assert "- load average at end: " in text


def test_ratio_verdict_and_table():
    assert common.ratio(33.0, 30.0) == pytest.approx(1.1)
    with pytest.raises(ValueError):
        common.ratio(1.0, 0.0)
    assert common.verdict(1.05, 1.10) == "holds"
    assert common.verdict(1.2, 1.10) == "missed"
    assert common.verdict(1.8, 1.7, higher_is_better=True) == "holds"
    assert common.table(["a", "b"], [[1, 2]]) == ["| a | b |", "|---|---:|", "| 1 | 2 |"]
    walls = {
        label: {"wall": wall}
        for (label, _, _), wall in zip(bench_concurrency.SETUPS, [100.0, 120.0, 55.0], strict=True)
    }
    assert bench_concurrency.best_speedup(walls) == (
        "1 at a time, 1 thread",
        pytest.approx(100 / 55),
    )
    assert bench_gpu_packing.trials_per_hour(8, 1800.0) == pytest.approx(16.0)


def test_set_dotted_copies_and_creates_levels():
    raw = {"train": {"epochs": 5, "lr": 1.0}}
    out = common.set_dotted(raw, {"train.epochs": 2, "resources.cpu": 1, "name": "x"})
    assert out == {"train": {"epochs": 2, "lr": 1.0}, "resources": {"cpu": 1}, "name": "x"}
    assert raw["train"]["epochs"] == 5


def test_demo_raw_paths_are_absolute():
    raw = common.demo_raw()
    assert Path(raw["data"]["dir"]).is_absolute()
    assert Path(raw["model"]["sentencepiece"]).is_absolute()
    assert Path(raw["output_dir"]) == common.CACHE


def test_end_spacing_skips_the_first_trial_and_groups_by_framework():
    ends = [("hf", 130.0), ("fairseq", 100.0), ("fairseq", 165.0), ("hf", 190.0)]
    assert bench_overhead.end_spacing(ends) == {"hf": [30.0, 25.0], "fairseq": [35.0]}


def event(step: int, wall: float, split: str = "train") -> MetricEvent:
    return MetricEvent(step=step, epoch=step / 225, split=split, loss=0.5, wall_time=wall)


def test_interval_rates_drop_warmup_and_intervals_with_an_evaluation():
    events = [
        event(25, 1.0),
        event(50, 1.5),  # warm-up interval: dropped
        event(75, 1.75),  # 100 updates/s
        event(75, 2.0, "valid"),
        event(75, 2.5, "test"),
        event(100, 4.0),  # after an evaluation: no interval
        event(125, 4.5),  # 50 updates/s
    ]
    assert bench_frameworks.interval_rates(events) == [100.0, 50.0]


def job(tmp_path: Path) -> TrialJob:
    arch = ArchConfig(layers=2, embed_dim=64, ffn_dim=128, heads=4, max_positions=64)
    return TrialJob(
        framework="fairseq",
        seed=1,
        init="random",
        method="full",
        train=TrainConfig(epochs=3, batch_size=8).model_dump(mode="json"),
        lora=None,
        arch=arch.model_copy(update={"vocab_size": 1002}).model_dump(mode="json"),
        num_classes=2,
        num_train=1800,
        data="/data/fairseq",
        init_checkpoint="/init/init-random-s1.pt",
        out_dir=str(tmp_path / "trial"),
    )


def test_bare_fairseq_is_stock_fairseq_train_with_the_trainers_arguments(tmp_path: Path):
    from dataclasses import asdict

    trial = job(tmp_path)
    command = bench_overhead.bare_fairseq(asdict(trial), tmp_path / "bare")
    assert Path(command[0]).name == "fairseq-train"
    expected = train_args(trial)
    save = expected.index("--save-dir") + 1
    assert command[1 : save + 1] == expected[:save]
    assert command[save + 1] == str(tmp_path / "bare" / "checkpoints")
    assert command[save + 2 :] == expected[save + 1 :]


def test_bare_hf_passes_the_jobs_recipe(tmp_path: Path):
    from dataclasses import asdict

    trial = replace(job(tmp_path), framework="hf", data="/data/hf")
    command = bench_overhead.bare_hf(asdict(trial), tmp_path / "bare")
    assert command[1].endswith("hf_plain.py")
    values = dict(zip(command[2::2], command[3::2], strict=False))
    assert values["--epochs"] == "3"
    assert values["--warmup-steps"] == "41"  # 6% of 675 updates, half up
    assert values["--init"] == "/init/init-random-s1.pt"
    assert values["--data"] == "/data/hf"
    assert command[command.index("--precision") + 1] == "fp32"  # the job's train.precision


def test_parsers_and_defaults():
    args = bench_overhead.build_parser().parse_args(["--quick", "--no-doc"])
    assert args.quick and args.no_doc and args.workdir == common.WORKDIR
    assert bench_overhead.epochs_for(args) == bench_overhead.QUICK_EPOCHS
    args = bench_overhead.build_parser().parse_args(["--long", "--frameworks", "hf"])
    assert bench_overhead.epochs_for(args) == bench_overhead.LONG_EPOCHS
    assert args.frameworks == ["hf"]
    assert bench_overhead.epochs_for(bench_overhead.build_parser().parse_args([])) == 6
    args = bench_concurrency.build_parser().parse_args(["--epochs", "5"])
    assert args.epochs == 5 and not args.quick
    assert bench_frameworks.build_parser().parse_args([]).threads == 1
    assert bench_gpu_packing.build_parser().parse_args(["--packings", "1", "2"]).packings == [1, 2]
    assert bench_summarize.build_parser().parse_args(["--sizes", "12"]).sizes == [12]


def test_sweep_changes_are_valid_specs(tmp_path: Path):
    """Each script's overrides of the demo spec pass the real schema."""
    from sweeper.spec.load import validate_mapping

    changes = [
        bench_overhead.sweep_changes(10, ["fairseq", "hf"], [1, 2]),
        *(
            {**workload, **bench_concurrency.changes(2, 1)}
            for workload in bench_concurrency.workloads(argparse.Namespace(quick=True), 3).values()
        ),
        bench_gpu_packing.changes(4, 1, [1, 2], 5),
    ]
    for change in changes:
        raw = common.set_dotted(common.demo_raw(), {"output_dir": str(tmp_path), **change})
        validate_mapping(raw, "bench.yaml", base_dir=tmp_path)


def test_bounds_give_the_trial_length_each_added_cost_needs():
    figures = {
        "bare": {"fairseq": 30.0},
        "trial": {"fairseq": 31.0},
        "run": {"fairseq": 50.0},
        "steady": {"spacing": {"fairseq": [32.0, 33.0, 34.0]}},
    }
    lines = bench_overhead.bounds(figures, 1.10)
    assert "- fairseq, sweeper trial: +1.0 s per trial; ratio <= 1.10 from a 10 s" in lines[2]
    assert (
        "- fairseq, single-trial sweep: +20.0 s per trial; ratio <= 1.10 from a 200 s" in (lines[3])
    )
    assert "- fairseq, steady state: +3.0 s per trial; ratio <= 1.10 from a 30 s" in lines[4]


def test_a_speedup_above_the_physical_limit_is_not_called_a_pass():
    assert bench_concurrency.speedup_verdict(1.8) == "holds"
    assert bench_concurrency.speedup_verdict(1.5) == "missed"
    assert bench_concurrency.speedup_verdict(2.7).startswith("above the limit")


def test_stage_bench_compares_checkpoint_and_table_1():
    row = {"checkpoint": "ab" * 32, "table1": {"hf/random/full/s1": [675, 60.0, 55.5]}}
    same = bench_stages.compare(row, dict(row))
    assert same[0].startswith(
        "- pretrained weights (sha256 of the checkpoint's tensors): identical"
    )
    assert same[1].endswith("identical")
    other = {"checkpoint": "cd" * 32, "table1": {"hf/random/full/s1": [450, 60.0, 55.5]}}
    differ = bench_stages.compare(row, other)
    assert "DIFFERENT" in differ[0]
    assert "DIFFERENT: hf/random/full/s1: [450, 60.0, 55.5] -> [675, 60.0, 55.5]" in differ[1]


def test_run_together_starts_every_command_before_any_ends(tmp_path: Path):
    """Each command records when it started, then waits for a file the other one writes:
    run one after the other, the first would wait for ever (timeout: it fails)."""
    script = (
        "import pathlib, sys, time\n"
        "me, other = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
        "me.write_text('started')\n"
        "deadline = time.time() + 20\n"
        "while not other.exists():\n"
        "    assert time.time() < deadline, 'the other command never started'\n"
        "    time.sleep(0.05)\n"
    )
    a, b = tmp_path / "a", tmp_path / "b"
    timed = common.run_together(
        [[sys.executable, "-c", script, a, b], [sys.executable, "-c", script, b, a]]
    )
    assert a.exists() and b.exists() and len(timed) == 2
    assert common.together_wall(timed) >= max(t.wall for t in timed) - 1e-3  # float epochs
    with pytest.raises(RuntimeError, match="exited 3"):
        common.run_together([[sys.executable, "-c", "raise SystemExit(3)"], ["true"]])


def test_the_ceiling_of_a_mix_weighs_each_trainer_by_its_own_time():
    ceiling = {
        "fairseq": {"alone": [10.0, 10.0], "together": 10.0},
        "hf": {"alone": [5.0, 5.0], "together": 6.0},
    }
    assert bench_concurrency.mix_ceiling(ceiling) == pytest.approx(30.0 / 16.0)


def test_bare_command_follows_the_jobs_framework(tmp_path: Path):
    from dataclasses import asdict

    fairseq = {**asdict(job(tmp_path)), "framework": "fairseq"}
    hf = {**fairseq, "framework": "hf"}
    assert Path(bench_overhead.bare_command(fairseq, tmp_path)[0]).name == "fairseq-train"
    assert bench_overhead.bare_command(hf, tmp_path)[1].endswith("hf_plain.py")


def test_before_and_after_puts_each_part_of_both_codes_side_by_side():
    parts = [("start", 4.0), ("trainer", 10.0)]
    figures = {
        "baseline_rev": "abc123",
        "baseline": {"hf": {"walls": [20.0, 22.0], "parts": [("start", 8.0), ("trainer", 10.5)]}},
        "parts": {"hf": parts},
        "run": {"hf": 15.0},
        "bare": {"hf": 10.0},
    }
    lines = bench_overhead.before_after(figures)
    assert "abc123's code" in lines[0] and '{"hf": [20.0, 22.0]}' in lines[0]
    table = lines[2:]
    assert table[0] == "| part | hf, abc123 | hf, this checkout |"
    assert "| start | 8.00 | 4.00 |" in table
    assert "| whole run | 21.0 | 15.0 |" in table
    assert "| added over the bare trainer | +11.0 | +5.0 |" in table
    args = bench_overhead.build_parser().parse_args(["--baseline", "abc123"])
    assert args.baseline == "abc123"
    assert bench_overhead.build_parser().parse_args([]).baseline is None


def test_code_of_unpacks_a_revisions_src(tmp_path: Path):
    src = common.code_of("HEAD", tmp_path / "code")
    assert (src / "sweeper" / "__init__.py").is_file()
    assert not (tmp_path / "code" / "tests").exists()
    src = common.code_of("HEAD", tmp_path / "with-support", "tests/support")
    assert (src.parent / "tests" / "support" / "dummy_trainer.py").is_file()


def _solo(wall: float, rate: float, ok: bool = True) -> dict:
    return {"ok": ok, "wall_s": wall, "updates_per_s": rate, "on_cuda": True,
            "best_valid": 55.5, "test_there": 48.5, "peak_gpu_mib": 1251.0}  # fmt: skip


GPU_RESULTS = {
    "device": "cuda", "machine": {"gpu": "GPU 0: test card"}, "started": "2026-11-27 15:22",
    "load_start": "0.10, 0.00, 0.00", "ended_load": "1.00, 0.50, 0.20", "cores": 16,
    "setup": {"fairseq_build_s": 39.1, "init_s": 1.2}, "run_s": 249.4,
    "solo": {
        "fairseq, fp32": {"bare": {"ok": True, "wall_s": 24.0, "peak_gpu_mib": 1251.0},
                          "sweeper": _solo(20.0, 36.9)},
        "hf, fp32": {"bare": {"ok": True, "wall_s": 21.0, "peak_gpu_mib": 1183.0},
                     "sweeper": _solo(16.0, 84.7)},
        "fairseq, bf16": {"bare": {"ok": False, "error": "AttributeError: 'NoneType' object "
                                   "has no attribute 'xla_device'", "wall_s": None},
                          "sweeper": _solo(29.4, 39.2)},
        "hf, bf16": {"bare": {"skipped": "time budget"}, "sweeper": {"skipped": "time budget"}},
    },
    "packed": {
        "2": {"trials": ["fairseq, fp32", "hf, fp32"], "ok": True, "wall_s": 18.0,
              "gpu_util_median": 0.0, "peak_gpu_mib": 2431.0,
              "each": [_solo(18.0, 35.4), _solo(15.4, 60.6)]},
        "4": {"skipped": "time budget"},
    },
}  # fmt: skip


def test_the_gpu_check_section_reads_its_figures_off_the_results():
    text = gpu_report.section(GPU_RESULTS, gpu_trainers.__doc__)
    assert text.startswith("## GPU check\n")
    assert (
        "Command: `python bench/gpu_trainers.py prepare DIR;" in text
        and "(2026-11-27 15:22)" in text
    )
    assert "- gpu: GPU 0: test card" in text and "- load average at end: 1.00, 0.50, 0.20" in text
    assert "| fairseq, fp32 | finished | finished | 20.0 | 24.0 | 0.83 | 36.9 | yes |" in text
    assert "| fairseq, bf16 | finished | failed: AttributeError:" in text
    assert "| hf, bf16 | skipped (time budget) | skipped (time budget) |" in text
    # k = 1: the two fp32 trials one after the other, 2 trials in 36 s = 200 per hour
    assert "| 1 | fairseq, hf (one after the other) | yes | 36.0 | 200 | 1.00 |" in text
    assert "| 2 | fairseq, hf | yes | 18.0 | 400 | 2.00 | 0.0 | 2431.0 | 35.4 / 60.6 |" in text
    assert "| 4 | - | skipped (time budget) |" in text
    assert "- 5 of 6 single runs finished (2 skipped for time)." in text
    assert "- fairseq, bf16: stock fairseq-train cannot run it" in text
    assert "- 2 trials at once: 400 trials/hour, 2.00x one at a time;" in text


def test_the_gpu_check_expects_a_packing_to_scale_from_the_last_one():
    results = {"solo": {"a": {"sweeper": {"wall_s": 30.0}, "bare": {"wall_s": 20.0}}},
               "packed": {}}  # fmt: skip
    assert gpu_trainers._packed_estimate(results, 2) == pytest.approx(60.0)  # from k = 1
    results["packed"] = {"2": {"wall_s": 25.0}, "4": {"skipped": "time budget"}}
    assert gpu_trainers._packed_estimate(results, 4) == pytest.approx(50.0)
