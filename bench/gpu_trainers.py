"""The GPU check: sweeper's trainers at the lab's size on a GPU, against the bare frameworks.

    python bench/gpu_trainers.py prepare DIR          # here: jobs, data and wheels in DIR
    python bench/gpu_trainers.py run DIR --out OUT    # on the GPU machine: OUT/results-cuda.json
    python bench/gpu_trainers.py report FILE          # here: the "GPU check" section

The GPU machine this project can borrow has torch, transformers and PEFT, but neither
Ray, MLflow nor fairseq, and no network; what it needs travels with the tree (64 MiB at
most). So `prepare` builds everything here: the lab's stand-in files (`sweeper fixture
lab-size`: 1,800 / 200 / 200 reviews, a 32,000-row vocabulary), their prepared token ids
(the same ids for both frameworks), and one job per framework and precision (fp32, bf16)
from the shipped sweeps/roberta.yaml by `sweeper.trainers.trial_pipeline.build_job`: the
lab's 4 x 512 arch, seed 1, random init, batch 8, one epoch (225 updates), one thread.
The random-init weights (92 MB) do not travel: `run` writes them again on the GPU
machine with `sweeper.models.init.init_checkpoint` from the job's own arguments and
checks that their cache key (the file name) is the one recorded here. fairseq travels
as its pinned sdist and is compiled there (bench/gpu_wheels.py).

`run` then measures, one process at a time: each job through sweeper's trainer
(`sweeper.trainers.runner.run_trainer`, the subprocess a Ray trial runs, below Ray and
MLflow) and the same job bare (stock fairseq-train with the trainer's own arguments,
run as `python -m fairseq_cli.train`; bench/hf_plain.py for HF: bench_overhead's bare
commands); then the fp32 jobs packed on the one GPU, 2 and 4 trials at once (half
fairseq, half HF), against the two run alone one after the other (k = 1). It stops
starting new runs when its time budget (`--budget-s`, 330 s from its start, the setup
included) would be passed, and says which it skipped.

Reported per run: its wall time (process start to exit: start-up, one epoch, the epoch-end
evaluation of valid and test, checkpoints), updates per second (sweeper's trainer: median
over the 25-update intervals with no evaluation, the first dropped,
`bench_frameworks.interval_rates`), the best validation accuracy and the test accuracy
there (one epoch from random init at the lab's lr of 1e-5 stays near chance: they show
that each run evaluated and selected, not what the lab learns), and the GPU's peak memory
in use and median utilisation (nvidia-smi every 0.5 s, whole device, over the whole
run: start-up and evaluation included).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import common
import gpu_runs

TITLE = "GPU check"
ROBERTA = common.ROOT / "sweeps" / "roberta.yaml"
FRAMEWORKS, PRECISIONS, PACKINGS = ("fairseq", "hf"), ("fp32", "bf16"), (2, 4)
PACKED_PRECISION = "fp32"
EPOCHS, THREADS, LOG_INTERVAL = 1, 1, 25
QUICK_FIXTURE = ["--train-size", "32", "--pretrain-steps", "1"]
QUICK_ARCH = ["model.arch.layers=2", "model.arch.embed_dim=64", "model.arch.ffn_dim=128",
              "model.arch.heads=4"]  # fmt: skip
BUDGET_S = 330.0
SITE = Path("/tmp/gpucheck")
"""Where `run` installs the carried packages on the GPU machine (outside the tree)."""


def prepare(folder: Path, quick: bool, wheels: bool) -> None:
    """DIR/jobs.json, DIR/data/, DIR/wheels/ (see the module docstring); the fixture, the
    prepared sweep and the init files stay in DIR-scratch, which does not travel."""
    from sweeper.cli.fixture import overrides
    from sweeper.spec.load import load_spec
    from sweeper.trainers.trial_pipeline import build_job, prepare_inputs
    from sweeper.trial_keys import make_trial

    scratch = folder.with_name(folder.name + "-scratch")
    shutil.rmtree(folder, ignore_errors=True)
    lab = scratch / "lab"
    common.run_timed(
        common.sweeper_command("fixture", "lab-size", lab, *(QUICK_FIXTURE if quick else []))
    )
    spec = load_spec(ROBERTA, [
        *overrides(lab), f"output_dir={scratch / 'sweep'}", "grid.seed=[1]",
        "grid.init=[random]", f"train.epochs={EPOCHS}", *(QUICK_ARCH if quick else []),
    ])  # fmt: skip
    inputs = prepare_inputs(spec, log=lambda _: None, need_pretrained=False)
    data = {
        str(source): shutil.copytree(source, folder / "data" / name)
        for name, source in inputs.data.items()
    }
    jobs = {}
    for precision in PRECISIONS:
        for framework in FRAMEWORKS:
            trial = make_trial(spec, seed=1, init="random", framework=framework, method="full")
            job = build_job(spec, trial, inputs, folder / "unused", threads=THREADS)
            jobs[f"{framework}, {precision}"] = asdict(replace(
                job,
                train={**job.train, "precision": precision},
                extra={**job.extra, "log_interval": 1 if quick else LOG_INTERVAL},
                data=str(Path(data[job.data]).relative_to(folder)),
                init_checkpoint=f"init/{Path(job.init_checkpoint).name}",
                out_dir=f"{framework}-{precision}",
            ))  # fmt: skip
    plan = {"quick": quick, "jobs": jobs}
    (folder / "jobs.json").write_text(json.dumps(plan, indent=2), encoding="utf-8")
    if wheels:
        import gpu_wheels

        gpu_wheels.collect(folder / "wheels")
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20
    print(f"{len(jobs)} jobs in {folder / 'jobs.json'}; {size:.1f} MiB to carry", flush=True)


def run(folder: Path, device: str, out: Path | None, budget: float, packings: list[int]) -> None:
    """Every run of the module docstring, in order; results saved after each."""
    clock = time.monotonic()
    started = (time.strftime("%Y-%m-%d %H:%M"), common.load_average())
    setup: dict[str, Any] = {}
    if device == "cuda" and (folder / "wheels").is_dir():
        import gpu_wheels

        setup.update(gpu_wheels.install(folder / "wheels", SITE / "site"))
    _on_path(common.ROOT / "src")
    setup["imports_s"] = _timed(_warm_imports)
    plan = json.loads((folder / "jobs.json").read_text(encoding="utf-8"))
    jobs = {name: _job(folder, raw, device) for name, raw in plan["jobs"].items()}
    setup["init_s"] = _timed(lambda: [_write_init(folder, job) for job in jobs.values()])
    results: dict[str, Any] = {
        "device": device, "machine": {**common.machine(), "peft": _version("peft")},
        "started": started[0], "load_start": started[1], "quick": plan["quick"],
        "setup": setup, "solo": {}, "packed": {}, "command": " ".join(sys.argv),
    }  # fmt: skip
    save = _saver(folder, out, device, results)
    save()
    for name, job in jobs.items():
        for kind in ("bare", "sweeper"):
            if not _fits(clock, budget, _longest(results)):
                results["solo"].setdefault(name, {})[kind] = {"skipped": "time budget"}
                continue
            run_one = gpu_runs.through_sweeper if kind == "sweeper" else gpu_runs.bare
            found = run_one(job, folder / "runs" / device / kind / job.out_dir)
            results["solo"].setdefault(name, {})[kind] = found
            print(f"{device} {name} {kind}: {json.dumps(found)}", flush=True)
            save()
    for k in packings:
        group = [jobs[f"{FRAMEWORKS[i % 2]}, {PACKED_PRECISION}"] for i in range(k)]
        if not _fits(clock, budget, _packed_estimate(results, k)):
            results["packed"][str(k)] = {"skipped": "time budget"}
        else:
            results["packed"][str(k)] = gpu_runs.packed(
                group, folder / "runs" / device / f"packed-{k}"
            )
        print(f"{device} {k} packed: {json.dumps(results['packed'][str(k)])}", flush=True)
        save()
    results.update(ended_load=common.load_average(), cores=len(os.sched_getaffinity(0)))
    results["run_s"] = round(time.monotonic() - clock, 1)
    save()


def _warm_imports() -> None:
    """Import what the trainers import once, before any timed run, so the first run does
    not pay for a cold disk cache; fails early where a carried package does not import.
    (Here, not in a child: writing the init files next imports the same.)"""
    import fairseq_cli.train  # noqa: F401
    import pydantic  # noqa: F401
    import torch
    import transformers  # noqa: F401

    torch.zeros(1)


def _on_path(folder: Path) -> None:
    """`folder` first on sys.path here and on PYTHONPATH for the trainer subprocesses."""
    sys.path.insert(0, str(folder))
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(folder), *rest])


def _job(folder: Path, raw: dict[str, Any], device: str) -> Any:
    from sweeper.trainers.base import TrialJob

    paths = {key: str(folder / raw[key]) for key in ("data", "init_checkpoint")}
    return TrialJob(**{**raw, **paths, "device": device})


def _write_init(folder: Path, job: Any) -> None:
    """The job's random-init file, written as `build_job` wrote it here."""
    from sweeper.models.init import init_checkpoint
    from sweeper.spec.model_block import ArchConfig

    arch = ArchConfig.model_validate(job.arch)
    path = init_checkpoint(arch=arch, vocab_size=int(arch.vocab_size or 0),
                           num_classes=job.num_classes, init=job.init, seed=job.seed,
                           pretrained=None, out_dir=folder / "init")  # fmt: skip
    if path != Path(job.init_checkpoint):
        raise RuntimeError(f"init file {path}, but the job was built with {job.init_checkpoint}")


def _fits(clock: float, budget: float, need: float) -> bool:
    return time.monotonic() - clock + need <= budget


def _packed_estimate(results: dict[str, Any], k: int) -> float:
    """What k trials at once are expected to take: the last packing's wall (else the
    longest single run's, as k = 1) scaled by the trials, as if the GPU were the limit."""
    done = {int(n): f["wall_s"] for n, f in results["packed"].items() if "wall_s" in f}
    last = max(done, default=1)
    return (done[last] if done else _longest(results)) * k / last


def _longest(results: dict[str, Any]) -> float:
    """The longest single run so far: what the next one is expected to take."""
    walls = [r.get("wall_s") or 0.0 for runs in results["solo"].values() for r in runs.values()]
    return max(walls, default=0.0)


def _timed(work: Any) -> float:
    started = time.monotonic()
    work()
    return round(time.monotonic() - started, 1)


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _saver(folder: Path, out: Path | None, device: str, results: dict[str, Any]) -> Any:
    def save() -> None:
        text = json.dumps(results, indent=2)
        for where in filter(None, (folder, out)):
            where.mkdir(parents=True, exist_ok=True)
            (where / f"results-{device}.json").write_text(text, encoding="utf-8")

    return save


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("prepare", "run", "report"))
    parser.add_argument("path", type=Path, help="DIR (prepare, run) or a results file (report)")
    parser.add_argument("--quick", action="store_true", help="prepare: tiny sizes (the CPU test)")
    parser.add_argument("--no-wheels", action="store_true", help="prepare: carry no packages")
    parser.add_argument("--device", default="cuda", help="run: cuda, or cpu (the CPU test)")
    parser.add_argument("--out", type=Path, help="run: also write the results here")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="run: time budget")
    parser.add_argument("--packings", type=int, nargs="*", default=list(PACKINGS))
    parser.add_argument("--no-doc", action="store_true", help="report: print only")
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(args.path.resolve(), args.quick, not args.no_wheels)
    elif args.step == "run":
        run(args.path.resolve(), args.device, args.out, args.budget_s, args.packings)
    else:
        import gpu_report

        results = json.loads(args.path.read_text(encoding="utf-8"))
        common.publish(TITLE, gpu_report.section(results, __doc__), not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
