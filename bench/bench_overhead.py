"""Overhead per trial: the same trial bare, through `sweeper trial`, and through `sweeper run`.

    python bench/bench_overhead.py            # ~30 s trials (demo data, 6 epochs), fairseq and hf
    python bench/bench_overhead.py --long     # ~5 min trials (80 epochs); not in `make bench`
    python bench/bench_overhead.py --quick    # 1-epoch trials: checks the script
    python bench/bench_overhead.py --baseline 1a38f1e  # also that commit's single-trial run

The trial is the demo's (tiny RoBERTa, 1,800 sentences, batch 8), random init, seed 1,
one thread (`resources.cpu: 1`; every run below gets the same thread pinning). Runs:

- bare fairseq: the stock `fairseq-train` console script with exactly the arguments
  sweeper's fairseq trainer builds (read back from the trial's saved job), own save dir;
- bare hf: bench/hf_plain.py, a plain `transformers.Trainer` script on the same ids,
  initial weights, recipe and per-epoch eval/save schedule;
- `sweeper trial` (no Ray, no MLflow; the code path a Ray trial calls);
- a single-trial `sweeper run` (Ray start, fresh MLflow store, summary included); with
  `--baseline REV` also REV's code (its `src/` first on PYTHONPATH, this checkout's
  installed libraries), the same trial: the before and after of the fixed costs;
- steady state: a 4-trial `sweeper run` (seeds 1-2 × fairseq/hf, one at a time): the
  spacing between consecutive trial-run end times is what one more trial costs.

Ratios are against the bare run of the same framework. Targets: <= 1.10 for a 30 s
trial, <= 1.03 for a 5 min trial. The single-trial sweep is broken into parts from its
own record (MLflow run times, the trial folder's file times), and the fixed costs are
timed alone in a fresh process (bench/overhead_phases.py). Prepared data is copied from the demo
cache first (see common.py), outside every timing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import common
import overhead_phases

TITLE = "Overhead per trial"
EPOCHS, LONG_EPOCHS, QUICK_EPOCHS = 6, 80, 1
FRAMEWORKS = ("fairseq", "hf")
STEADY_SEEDS = [1, 2]
SINGLE_TRIAL_ADDED = 8.0
"""Seconds a single-trial sweep may add to the bare trainer (issue 18, target 2)."""
STEADY_TARGETS = {"fairseq": 1.05, "hf": 1.03}
"""Steady state per trial against the bare trainer (issue 18, target 3)."""
BARE_REPEATS = 2
RUN_REPEATS = 2
"""Single-trial sweeps per framework: Ray's own start varied 2.5-5 s between runs."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    parser.add_argument("--long", action="store_true", help=f"{LONG_EPOCHS}-epoch trials")
    parser.add_argument("--epochs", type=int, help="override the trial length")
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--no-steady", action="store_true", help="skip the multi-trial sweep")
    parser.add_argument(
        "--baseline", metavar="REV", help="also time REV's single-trial sweeper run, part by part"
    )
    return parser


def epochs_for(args: argparse.Namespace) -> int:
    if args.epochs:
        return args.epochs
    return QUICK_EPOCHS if args.quick else LONG_EPOCHS if args.long else EPOCHS


def sweep_changes(epochs: int, frameworks: list[str], seeds: list[int]) -> dict[str, Any]:
    """The demo spec, cut to the grid and length measured here, one trial at a time."""
    return {
        "train.epochs": epochs,
        "grid": {"seed": seeds, "init": ["random"], "framework": frameworks, "method": ["full"]},
        "resources": {"cpu": 1},
        "max_concurrent": 1,
        "retries": 0,
    }


# --- bare commands, from the job sweeper saved --------------------------------------


def bare_fairseq(job: dict[str, Any], out: Path) -> list[str]:
    """Stock fairseq-train with the trainer's own arguments (only --save-dir moved)."""
    from sweeper.trainers.base import TrialJob
    from sweeper.trainers.fairseq.fairseq_trainer import train_args

    args = train_args(TrialJob(**{**job, "out_dir": str(out)}))
    return [str(Path(sys.executable).parent / "fairseq-train"), *args]


def bare_hf(job: dict[str, Any], out: Path) -> list[str]:
    """bench/hf_plain.py with the job's data, init weights and recipe."""
    from sweeper.trainers.base import TrialJob, warmup_updates

    train, total = job["train"], TrialJob(**job).total_updates
    return [
        sys.executable, str(Path(__file__).with_name("hf_plain.py")),
        "--data", job["data"], "--init", job["init_checkpoint"], "--out", str(out),
        "--epochs", str(train["epochs"]), "--batch-size", str(train["batch_size"]),
        "--lr", str(train["lr"]),
        "--warmup-steps", str(warmup_updates(total, float(train["warmup_ratio"]))),
        "--weight-decay", str(train["weight_decay"]), "--dropout", str(train["dropout"]),
        "--attention-dropout", str(train["attention_dropout"]),
        "--adam-betas", *(str(b) for b in train["adam_betas"]),
        "--adam-eps", str(train["adam_eps"]), "--clip-norm", str(train["clip_norm"]),
        "--seed", str(job["seed"]), "--threads", "1",
        "--precision", str(train.get("precision", "fp32")),
    ]  # fmt: skip


def bare_command(job: dict[str, Any], out: Path) -> list[str]:
    """The bare trainer of a job sweeper saved (trial.json), writing into `out`."""
    return (bare_fairseq if job["framework"] == "fairseq" else bare_hf)(job, out)


# --- reading a finished sweep's record ----------------------------------------------


def trial_runs(out: Path, experiment: str) -> tuple[Any, list[Any]]:
    """(parent run, trial runs) of a finished sweep in its SQLite store."""
    from mlflow import MlflowClient

    from sweeper import record_names

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id], max_results=1000)
    parent = next(
        r for r in runs if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_SWEEP
    )
    return parent, [
        r for r in runs if r.data.tags.get(record_names.TAG_ROLE) == record_names.ROLE_TRIAL
    ]


def end_spacing(ends: list[tuple[str, float]]) -> dict[str, list[float]]:
    """Per framework, the time from the previous trial's end to each trial's end (first
    trial excluded): at one trial at a time, what one more trial costs a sweep."""
    ordered = sorted(ends, key=lambda item: item[1])
    spacing: dict[str, list[float]] = {}
    for (_, before), (framework, end) in itertools.pairwise(ordered):
        spacing.setdefault(framework, []).append(end - before)
    return spacing


def timeline(out: Path, experiment: str, started: float, ended: float) -> list[tuple[str, float]]:
    """Parts of a single-trial `sweeper run`, from its record: MLflow run times (ms), the
    trial folder's trial.json (written as the trainer starts) and trainer.log (last
    written as it ends)."""
    parent, trials = trial_runs(out, experiment)
    run = trials[0]
    folder = next((out / "trials").iterdir())
    job_written = (folder / "trial.json").stat().st_mtime
    log_done = (folder / "trainer.log").stat().st_mtime
    opened, closed = parent.info.start_time / 1e3, parent.info.end_time / 1e3
    run_closed = run.info.end_time / 1e3
    points = [
        (
            "CLI start to sweep run opened (imports, store, lease, Ray start, prepare check)",
            started,
            opened,
        ),
        ("runs created, trial scheduled, init weights", opened, job_written),
        ("trainer process (the training itself)", job_written, log_done),
        ("artifact upload, final report, run closed", log_done, run_closed),
        ("Tune teardown, sweep run closed", run_closed, closed),
        ("summary (tables, report logged), Ray shutdown, exit", closed, ended),
    ]
    return [(label, end - start) for label, start, end in points]


# --- the benchmark ------------------------------------------------------------------


def measure(args: argparse.Namespace, epochs: int) -> dict[str, Any]:
    work = args.workdir / "overhead"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = common.clean_env(threads=1)
    figures: dict[str, Any] = {"bare": {}, "trial": {}, "run": {}, "parts": {}, "phases": {}}
    figures["cpu"], figures["counters"] = {}, {}
    figures["bare_walls"], figures["run_walls"], figures["baseline"] = {}, {}, {}
    figures["baseline_rev"] = args.baseline
    if args.baseline:
        baseline_src = common.code_of(args.baseline, work / "baseline-code")
    for framework in args.frameworks:
        spec, _ = common.new_sweep(
            work, f"overhead-{framework}", sweep_changes(epochs, [framework], [1])
        )
        trial_out = work / f"trial-{framework}"
        timed = common.run_timed(
            common.sweeper_command("trial", spec, "--seed", 1, "--init", "random",
                                   "--framework", framework, "--out", trial_out, "--threads", 1),
            env=env,
        )  # fmt: skip
        figures["trial"][framework] = timed.wall
        cpu = {"sweeper trial": timed.cpu}
        job = json.loads((trial_out / "trial.json").read_text(encoding="utf-8"))
        bares = [
            common.run_timed(bare_command(job, work / f"bare-{framework}-{i}"), env=env, cwd=work,
                             trace=common.is_trainer)
            for i in range(BARE_REPEATS)
        ]  # fmt: skip
        figures["bare"][framework] = common.median([b.wall for b in bares])
        figures["bare_walls"][framework] = [b.wall for b in bares]
        cpu["bare"] = common.median([b.cpu for b in bares])
        figures["counters"].setdefault(framework, {})["bare"] = [
            common.counters(t) for b in bares for t in b.traced
        ]
        runs, parts, run_spec, run_out = single_trial_runs(work, framework, epochs, env)
        figures["run"][framework] = common.median([r.wall for r in runs])
        figures["run_walls"][framework] = [r.wall for r in runs]
        cpu["single-trial sweeper run"] = common.median([r.cpu for r in runs])
        figures["cpu"][framework] = cpu
        figures["parts"][framework] = median_parts(parts)
        print(
            f"{framework}: bare {figures['bare'][framework]:.1f} s, sweeper trial "
            f"{figures['trial'][framework]:.1f} s, single-trial sweeper run "
            f"{figures['run'][framework]:.1f} s",
            flush=True,
        )
        if args.baseline:
            figures["baseline"][framework] = baseline_runs(
                work, framework, epochs, {**env, "PYTHONPATH": str(baseline_src)}
            )
        figures["phases"][framework] = overhead_phases.measure(
            run_spec, next((run_out / "trials").iterdir()), env
        )
    if not args.no_steady:
        figures["steady"] = steady_state(work, epochs, args.frameworks, env)
        for framework, found in figures["steady"].pop("counters").items():
            figures["counters"].setdefault(framework, {})["sweep"] = found
    return figures


def single_trial_runs(
    work: Path, framework: str, epochs: int, env: dict[str, str], suffix: str = ""
) -> tuple[list[common.Timed], list[list[tuple[str, float]]], Path, Path]:
    """RUN_REPEATS single-trial `sweeper run`s, each in a fresh folder (a new store, as a
    user's first run): their timings, their parts, and the last one's spec and folder."""
    runs, parts = [], []
    for i in range(RUN_REPEATS):
        name = f"overhead-{framework}-run{i}{suffix}"
        spec, out = common.new_sweep(work, name, sweep_changes(epochs, [framework], [1]))
        runs.append(common.run_timed(common.sweeper_command("run", spec), env=env))
        parts.append(timeline(out, name, runs[-1].started, runs[-1].started + runs[-1].wall))
    return runs, parts, spec, out


def baseline_runs(work: Path, framework: str, epochs: int, env: dict[str, str]) -> dict[str, Any]:
    """The single-trial runs with the baseline's code (`env`'s PYTHONPATH): walls, parts."""
    runs, parts, _, _ = single_trial_runs(work, framework, epochs, env, "-baseline")
    walls = [r.wall for r in runs]
    print(f"{framework}, baseline: single-trial sweeper run {common.median(walls):.1f} s",
          flush=True)  # fmt: skip
    return {"walls": walls, "parts": median_parts(parts)}


def median_parts(parts: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """Each part's median over runs, in the parts' order."""
    return [(label, common.median([dict(p)[label] for p in parts])) for label, _ in parts[0]]


def steady_state(work: Path, epochs: int, frameworks: list[str], env: dict[str, str]) -> Any:
    spec, out = common.new_sweep(
        work, "overhead-steady", sweep_changes(epochs, frameworks, STEADY_SEEDS)
    )
    timed = common.run_timed(common.sweeper_command("run", spec), env=env, trace=common.is_trainer)
    _, trials = trial_runs(out, "overhead-steady")
    from sweeper import record_names

    ends = [(r.data.tags[record_names.TAG_FRAMEWORK], r.info.end_time / 1e3) for r in trials]
    trainer = {}
    for run in trials:
        framework = run.data.tags[record_names.TAG_FRAMEWORK]
        trainer.setdefault(framework, []).append(
            run.data.metrics.get(record_names.METRIC_WALL_TIME)
        )
    print(f"steady state: {len(trials)}-trial sweep in {timed.wall:.1f} s", flush=True)
    found: dict[str, list[dict[str, float]]] = {}
    for traced in timed.traced:
        framework = "fairseq" if "fairseq_main" in traced.command else "hf"
        found.setdefault(framework, []).append(common.counters(traced))
    return {
        "wall": timed.wall,
        "n": len(trials),
        "spacing": end_spacing(ends),
        "trainer": trainer,
        "counters": found,
    }


def report(figures: dict[str, Any], epochs: int, header: list[str]) -> str:
    lines = [*header, "", __doc__.split("\n\n", 2)[2].strip(), ""]
    long = epochs >= LONG_EPOCHS
    target = 1.03 if long else 1.10
    steady_target = {f: 1.03 if long else STEADY_TARGETS[f] for f in figures["bare"]}
    lines += [
        f"Trial length: {epochs} epochs ({epochs * 225} updates). Targets for this length: "
        f"single-trial sweep <= +{SINGLE_TRIAL_ADDED:.0f} s over the bare trainer; steady "
        "state per trial "
        + ", ".join(f"{f} <= {t:.2f}" for f, t in steady_target.items())
        + f"; the bounds below use {target:.2f}. Bare: median of {BARE_REPEATS} runs "
        f"({json.dumps(_rounded(figures['bare_walls']))} s); single-trial sweeper run: "
        f"median of {RUN_REPEATS} ({json.dumps(_rounded(figures['run_walls']))} s), its "
        "parts below the medians of its runs'.",
        "",
    ]
    rows, steady = [], figures.get("steady") or {}
    for framework, bare in figures["bare"].items():
        spacing = steady.get("spacing", {}).get(framework, [])
        per_trial = common.median(spacing) if spacing else None
        rows.append(
            [
                framework,
                f"{bare:.1f}",
                with_ratio(figures["trial"][framework], bare),
                with_ratio(figures["run"][framework], bare),
                added_verdict(figures["run"][framework] - bare),
                "-" if per_trial is None else with_ratio(per_trial, bare),
                "-"
                if per_trial is None
                else common.verdict(common.ratio(per_trial, bare), steady_target[framework]),
            ]
        )
    lines += common.table(
        ["framework", "bare (s)", "sweeper trial (s, ratio)", "single-trial sweeper run (s, ratio)",
         f"single-trial added (s; <= +{SINGLE_TRIAL_ADDED:.0f})",
         "steady state per trial (s, ratio)", "steady state (target above)"],
        rows,
    )  # fmt: skip
    if steady:
        lines += [
            "",
            f"Steady state: a {steady['n']}-trial sweep took {steady['wall']:.1f} s; spacing "
            f"of trial end times (s): {json.dumps(_rounded(steady['spacing']))}; the trainer's "
            f"own wall time per trial (s): {json.dumps(_rounded(steady['trainer']))}.",
        ]
    lines += ["", *counter_lines(figures["counters"])]
    lines += ["", *cpu_lines(figures["cpu"])]
    lines += ["", *bounds(figures, target)]
    lines += ["", "Single-trial `sweeper run`, from its own record (s):", ""]
    names = list(figures["parts"])
    labels = [label for label, _ in figures["parts"][names[0]]] if names else []
    lines += common.table(
        ["part", *names],
        [[label, *(f"{dict(figures['parts'][n])[label]:.2f}" for n in names)] for label in labels],
    )
    if figures["baseline"]:
        lines += ["", *before_after(figures)]
    lines += ["", "Fixed costs timed alone, in a fresh process (s):", ""]
    labels = list(dict.fromkeys(k for n in names for k in figures["phases"][n]))
    lines += common.table(
        ["phase", *names],
        [[label, *(f"{figures['phases'][n].get(label, float('nan')):.3f}" for n in names)]
         for label in labels],
    )  # fmt: skip
    return "\n".join(lines) + "\n"


def before_after(figures: dict[str, Any]) -> list[str]:
    """The single-trial sweep of the baseline's code against this checkout's, part by
    part (issue 18, target 2: the breakdown before and after)."""
    rev, names = figures["baseline_rev"], list(figures["baseline"])
    lines = [
        f"Before and after: the same single-trial `sweeper run` with {rev}'s code (its "
        "`src/` first on PYTHONPATH, this checkout's installed libraries), medians of "
        f"{RUN_REPEATS} runs each (s; walls: "
        + json.dumps(_rounded({n: figures["baseline"][n]["walls"] for n in names}))
        + "). Parts are cut at the same points of each record; a change can move work "
        "from one part to another, so read the whole run with them:",
        "",
    ]
    head = ["part"] + [f"{n}, {label}" for n in names for label in (rev, "this checkout")]
    rows = []
    for label, _ in figures["parts"][names[0]]:
        cells = []
        for n in names:
            cells += [dict(figures["baseline"][n]["parts"]).get(label, float("nan")),
                      dict(figures["parts"][n])[label]]  # fmt: skip
        rows.append([label, *(f"{c:.2f}" for c in cells)])
    whole, added = ["whole run"], ["added over the bare trainer"]
    for n in names:
        before = common.median(figures["baseline"][n]["walls"])
        whole += [f"{before:.1f}", f"{figures['run'][n]:.1f}"]
        added += [f"+{before - figures['bare'][n]:.1f}",
                  f"+{figures['run'][n] - figures['bare'][n]:.1f}"]  # fmt: skip
    return lines + common.table(head, [*rows, whole, added])


def counter_lines(found: dict[str, dict[str, list[dict[str, float]]]]) -> list[str]:
    """Why a trainer runs slower inside the sweep than bare, from the kernel's counters:
    more CPU work of its own, or time runnable but waiting for a core (issue 18, 3)."""
    lines = [
        "Trainer processes' kernel counters, read at each once-a-second scan from /proc "
        "(`stat`: CPU seconds; `task/*/schedstat`: run_delay, the time a runnable thread "
        "waited for a core another process held), per second of the process's life as "
        "the scans saw it (its first and last second are not seen):",
        "",
    ]
    rows = []
    for framework, where in found.items():
        for label, key in (("bare", "bare"), ("inside the steady-state sweep", "sweep")):
            for one in where.get(key, []):
                rows.append(
                    [framework, label, f"{one['seen']:.1f}", f"{one['cpu']:.3f}",
                     f"{one['waited']:.3f}"]
                )  # fmt: skip
    head = ["framework", "trainer process", "seconds seen", "CPU s per s", "waiting s per s"]
    lines += common.table(head, rows)
    for framework, where in found.items():
        bare, sweep = where.get("bare", []), where.get("sweep", [])
        if not bare or not sweep:
            continue
        seen = [common.median([x["seen"] for x in runs]) for runs in (bare, sweep)]
        waited = [common.median([x["waited"] for x in runs]) for runs in (bare, sweep)]
        cpu = [common.median([x["cpu"] * x["seen"] for x in runs]) for runs in (bare, sweep)]
        lines.append(
            f"- {framework}: inside the sweep the trainer lived {seen[1]:.1f} s against "
            f"{seen[0]:.1f} s bare ({seen[1] - seen[0]:+.1f} s); it waited for a core "
            f"{waited[1] * seen[1]:.1f} s against {waited[0] * seen[0]:.1f} s, and used "
            f"{cpu[1]:.1f} CPU s against {cpu[0]:.1f} (medians)."
        )
    return lines


def cpu_lines(cpu: dict[str, dict[str, float]]) -> list[str]:
    """CPU seconds of each run's process tree: on a shared machine the wall ratios above
    include waiting for a core, CPU seconds much less so."""
    lines = [
        "CPU seconds (user + sys) of each run's process tree, scanned once a second "
        "(less sensitive to other load than wall times; ratio to bare in brackets):",
        "",
    ]
    rows = []
    for framework, found in cpu.items():
        bare = found["bare"]
        rows.append(
            [
                framework,
                f"{bare:.1f}",
                *(
                    with_ratio(found[k], bare)
                    for k in ("sweeper trial", "single-trial sweeper run")
                ),
            ]
        )
    return lines + common.table(
        ["framework", "bare", "sweeper trial", "single-trial sweeper run"], rows
    )


def bounds(figures: dict[str, Any], target: float) -> list[str]:
    """What bounds each ratio: the seconds a setup adds to the bare trial, and the trial
    length at which that addition would be within the target."""
    lines = [
        "What bounds the ratios (added seconds are constant in the trial's length, so "
        "a ratio <= R needs a bare trial of at least added / (R - 1) seconds):",
        "",
    ]
    steady = (figures.get("steady") or {}).get("spacing", {})
    for framework, bare in figures["bare"].items():
        parts = [
            ("sweeper trial", figures["trial"][framework] - bare),
            ("single-trial sweep", figures["run"][framework] - bare),
        ]
        if steady.get(framework):
            parts.append(("steady state", common.median(steady[framework]) - bare))
        for label, added in parts:
            needed = max(added, 0) / (target - 1)
            lines.append(
                f"- {framework}, {label}: +{added:.1f} s per trial; ratio <= "
                f"{target:.2f} from a {needed:.0f} s bare trial on"
            )
    return lines


def added_verdict(added: float) -> str:
    """Seconds a single-trial `sweeper run` adds to the bare trainer, against the target."""
    held = "holds" if added <= SINGLE_TRIAL_ADDED else "missed"
    return f"+{added:.1f} ({held})"


def with_ratio(seconds: float, bare: float) -> str:
    return f"{seconds:.1f} ({common.ratio(seconds, bare):.3f})"


def _rounded(values: dict[str, list[float | None]]) -> dict[str, list[float | None]]:
    return {k: [None if v is None else round(v, 1) for v in vs] for k, vs in values.items()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    epochs = epochs_for(args)
    print(f"demo inputs ready in {common.ensure_inputs():.1f} s (not timed)", flush=True)
    common.warm_imports()
    info, start_load = common.machine(), common.load_average()
    figures = measure(args, epochs)
    title = f"{TITLE} (long)" if epochs >= LONG_EPOCHS else TITLE
    header = common.header(title, common.command_line("bench_overhead.py", argv), info, start_load)
    text = report(figures, epochs, header)
    common.publish(title, text, not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
