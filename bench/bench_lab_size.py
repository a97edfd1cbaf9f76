"""The lab's size: seconds per update and peak memory of each framework's trainer.

    python bench/bench_lab_size.py            # the lab's 1,800 reviews, 1 epoch (225 updates)
    python bench/bench_lab_size.py --quick    # 96 reviews: checks the script

The lab's files are stood in for by `sweeper fixture lab-size` (the demo corpus, a
32,000-row vocabulary, a fairseq RoBERTa of the lab's 4 x 512 arch, max_positions 256),
and each framework runs one trial of the shipped sweeps/roberta.yaml with `sweeper
trial` (the trainer subprocess every sweep trial runs, without Ray or MLflow): seed 1,
pretrained init, batch 8, one epoch, one thread, CPU unless CUDA is here. Seconds per
update are the median over the trainer's 25-update train intervals that hold no
evaluation, the first dropped as warm-up (`bench_frameworks.interval_rates`); peak RSS
is the largest resident set of any process of the trial (the trainer), from the
kernel's accounting of reaped children (`getrusage(RUSAGE_CHILDREN)`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import bench_frameworks
import common

TITLE = "The lab's size"
FRAMEWORKS = ("fairseq", "hf")
ROBERTA = common.ROOT / "sweeps" / "roberta.yaml"
PEAK = "peak-rss-kib"
WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    f"print('{PEAK}', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    return parser


def measure(work: Path, quick: bool) -> dict[str, dict[str, Any]]:
    """Build the fixture, run one trial per framework; {framework: figures}."""
    from sweeper.cli.fixture import overrides
    from sweeper.trainers.events import read_events

    lab = work / "lab"
    size = ["--train-size", "96", "--pretrain-steps", "2"] if quick else []
    common.run_timed(common.sweeper_command("fixture", "lab-size", lab, *size))
    found: dict[str, dict[str, Any]] = {}
    for framework in FRAMEWORKS:
        out = work / "trials" / framework
        trial = common.sweeper_command(
            "trial", ROBERTA, "--framework", framework, "--init", "pretrained", "--out", out,
            *overrides(lab), f"output_dir={work / 'runs'}", "resources.gpu=0",
            "train.epochs=1",
        )  # fmt: skip
        timed = common.run_timed([sys.executable, "-c", WRAPPER, *map(str, trial)])
        peak = next(line for line in timed.output.splitlines() if line.startswith(PEAK))
        events = read_events(out / "events.jsonl")
        rates = bench_frameworks.interval_rates(events)
        updates = max(e.step for e in events)
        found[framework] = {
            "seconds_per_update": 1 / common.median(rates),
            "intervals": len(rates),
            "updates": updates,
            "peak_rss_mib": int(peak.split()[1]) / 1024,
            "wall": timed.wall,
            "params": _params(timed.output),
        }
        print(f"{framework}: {json.dumps(found[framework])}", flush=True)
    return found


def _params(output: str) -> str:
    """The trainer's `trainable parameters N of M` line, as printed by `sweeper trial`."""
    line = next((ln for ln in output.splitlines() if ln.startswith("trainable parameters")), "")
    return line.removeprefix("trainable parameters ").strip() or "?"


def report(found: dict[str, dict[str, Any]], head: list[str]) -> str:
    lines = [*head, "", __doc__.split("\n\n", 2)[2].strip(), ""]
    rows = [
        [
            framework,
            figures["updates"],
            f"{figures['seconds_per_update']:.3f}",
            figures["intervals"],
            f"{figures['peak_rss_mib']:,.0f}",
            f"{figures['wall']:.0f}",
            figures["params"],
        ]
        for framework, figures in found.items()
    ]
    lines += common.table(
        ["framework", "updates", "s / update (median)", "intervals", "peak RSS (MiB)",
         "trial wall (s)", "trainable of total params"],
        rows,
    )  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_load = common.load_average()
    work = args.workdir / "lab-size"
    shutil.rmtree(work / "trials", ignore_errors=True)  # a fresh trial each run
    found = measure(work, args.quick)
    command = common.command_line("bench_lab_size.py", argv or sys.argv[1:])
    text = report(found, common.header(TITLE, command, common.machine(), start_load))
    common.publish(TITLE, text, not args.no_doc and not args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
