"""sweeper's HF trainer on a GPU: the subprocess every HF trial runs, on CUDA.

    python bench/gpu_trainers.py prepare DIR   # here: the jobs and their inputs, in DIR
    python bench/gpu_trainers.py run DIR       # where CUDA is: runs them, DIR/results.json
    python bench/gpu_trainers.py report FILE   # here: the "GPU trainers" section

The GPU machine this project can borrow has torch, transformers and PEFT, but neither
Ray, MLflow nor fairseq, and no network. So this check runs what a Ray trial runs
below Ray: `sweeper.trainers.runner.run_trainer` with the HF trainer, which starts
`python -m sweeper.trainers.hf.hf_main trial.json` and parses its event stream. The jobs
are built here by `sweeper.trainers.trial_pipeline.build_job` (the demo's token ids; seed 1's
starting weights from the demo's pretrained checkpoint, which fairseq writes, 3 epochs),
then only their device and paths change on the GPU machine. Each precision the spec
offers runs there, and LoRA; the fp32 job also runs here on the CPU, as the reference.

Reported per job: whether the trainer said it ran on CUDA, its wall time, training
updates per second (median over the 25-update intervals with no evaluation, the first
dropped: `bench_frameworks.interval_rates`), its best validation accuracy and the test
accuracy there, and the largest GPU memory in use while it ran (nvidia-smi, sampled).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

TITLE = "GPU trainers"
EPOCHS = 3
LOG_INTERVAL = 25
CLASSIFY, CAUSAL_LM = "sweeps/demo.yaml", "sweeps/demo-llm.yaml"
VARIANTS: dict[str, dict[str, Any]] = {
    "full, fp32": {"spec": CLASSIFY, "precision": "fp32"},
    "full, bf16": {"spec": CLASSIFY, "precision": "bf16"},
    "full, fp16": {"spec": CLASSIFY, "precision": "fp16"},
    "lora (r=8), bf16": {"spec": CLASSIFY, "precision": "bf16", "method": "lora"},
    "causal LM, full, fp32": {"spec": CAUSAL_LM, "precision": "fp32"},
    "causal LM, lora, bf16": {"spec": CAUSAL_LM, "precision": "bf16", "method": "lora"},
}
CPU_REFERENCES = ("full, fp32", "causal LM, full, fp32")


def prepare(folder: Path) -> None:
    """Jobs for the GPU machine, their inputs copied into `folder`, paths relative to it.
    The two demo sweeps' inputs come from their caches (runs/demo, runs/demo-llm),
    prepared first where missing."""
    from sweeper.spec.load import load_spec
    from sweeper.trainers.trial_pipeline import build_job, prepare_inputs
    from sweeper.trial_keys import make_trial

    root = Path(__file__).resolve().parents[1]
    shutil.rmtree(folder, ignore_errors=True)
    jobs = {}
    for name, variant in VARIANTS.items():
        spec = load_spec(root / variant["spec"], [f"train.epochs={EPOCHS}"])
        inputs = prepare_inputs(spec, log=lambda _: None)
        method = variant.get("method", "full")
        trial = make_trial(spec, seed=1, init="pretrained", framework="hf", method=method)
        job = build_job(spec, trial, inputs, folder / "unused", threads=1)
        data = _copy_in(Path(job.hf_data), folder / "inputs" / Path(variant["spec"]).stem)
        init = _copy_in(Path(job.init_checkpoint), data.parent)
        job = replace(
            job,
            train={**job.train, "precision": variant["precision"]},
            extra={**job.extra, "log_interval": LOG_INTERVAL},
            hf_data=str(data.relative_to(folder)),
            fairseq_data=str(data.relative_to(folder)) if job.extra.get("task") else "",
            init_checkpoint=str(init.relative_to(folder)),
            out_dir=_slug(name),
        )
        jobs[name] = asdict(job)
    (folder / "jobs.json").write_text(json.dumps(jobs, indent=2), encoding="utf-8")
    print(f"{len(jobs)} jobs in {folder / 'jobs.json'}")


def _copy_in(source: Path, into: Path) -> Path:
    """`source` (a file or a folder) copied into `into` once; returns the copy."""
    target = into / source.name
    if not target.exists():
        into.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)
    return target


def run(folder: Path, device: str) -> dict[str, Any]:
    """Run every job (on `device`) with the trial runner; write and return the results."""
    import common

    from sweeper.trainers.base import TrialJob
    from sweeper.trainers.hf.hf_trainer import HFTrainer
    from sweeper.trainers.runner import TrainerError, run_trainer

    jobs = json.loads((folder / "jobs.json").read_text(encoding="utf-8"))
    names = list(jobs) if device == "cuda" else list(CPU_REFERENCES)
    results: dict[str, Any] = {"device": device, "gpu": _gpu_name(), **_stack(), "jobs": {}}
    for name in names:
        raw = dict(jobs[name])
        for key in ("hf_data", "fairseq_data", "init_checkpoint"):
            raw[key] = str(folder / raw[key]) if raw[key] else ""
        out = folder / "runs" / device / raw["out_dir"]
        shutil.rmtree(out, ignore_errors=True)
        job = TrialJob(**{**raw, "out_dir": str(out), "device": device})
        events: list[Any] = []
        memory = _MemorySampler() if device == "cuda" else None
        started = time.monotonic()
        try:
            result = run_trainer(HFTrainer(), job, on_event=events.append)
            error = None
        except TrainerError as exc:
            result, error = None, f"{exc.reason}: " + " | ".join(exc.tail[-5:])
        wall = time.monotonic() - started
        rates = _rates(events)  # none for a run too short for a whole interval
        log = (out / "trainer.log").read_text(encoding="utf-8", errors="replace")
        found = {
            "ok": error is None,
            "error": error,
            "on_cuda": "trial on cuda" in log,
            "wall_s": round(wall, 1),
            "updates_per_s": common.median(rates) if rates else None,
            "peak_gpu_mib": memory.stop() if memory is not None else None,
            **_best(events, job.extra.get("select")),
            "checkpoint": bool(result and result.checkpoints.best),
        }
        results["jobs"][name] = found
        print(f"{device} {name}: {json.dumps(found)}", flush=True)
    path = folder / f"results-{device}.json"
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return results


def report(files: list[Path]) -> str:
    import common

    found = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    lines = [__doc__.split("\n\n", 2)[2].strip(), ""]
    for results in found:
        lines.append(
            f"- {results['device']} runs: {results['machine']}; python {results['python']}, "
            f"torch {results['torch']}, transformers {results['transformers']}, "
            f"peft {results['peft']}; GPU: {results['gpu']}"
        )
    lines.append("")
    rows = []
    for results in found:
        for name, one in results["jobs"].items():
            rows.append(
                [
                    name,
                    results["device"],
                    "yes" if one["ok"] else f"no: {one['error']}",
                    "yes" if one["on_cuda"] else "no",
                    one["wall_s"],
                    "-" if one["updates_per_s"] is None else f"{one['updates_per_s']:.1f}",
                    one.get("metric", "-"),
                    _pct(one.get("best_valid")),
                    _pct(one.get("test_there")),
                    "-" if one["peak_gpu_mib"] is None else one["peak_gpu_mib"],
                ]
            )
    lines += common.table(
        ["job", "device", "finished", "trainer on CUDA", "wall (s)", "updates/s (median)",
         "selected by", "best valid", "test there", "peak GPU MiB"],
        rows,
    )  # fmt: skip
    return "\n".join([*lines, "", *reading(found)]) + "\n"


def reading(found: list[dict[str, Any]]) -> list[str]:
    """What the table says, computed from it: every CUDA job finished on CUDA, and each
    fp32 job's speed and selected metric against its CPU reference."""
    by_device = {r["device"]: r["jobs"] for r in found}
    cuda, cpu = by_device.get("cuda", {}), by_device.get("cpu", {})
    lines = [
        f"- {sum(j['ok'] and j['on_cuda'] and j['checkpoint'] for j in cuda.values())} of "
        f"{len(cuda)} CUDA jobs finished with the trainer on CUDA and a best checkpoint saved."
    ]
    for name in CPU_REFERENCES:
        gpu, ref = cuda.get(name), cpu.get(name)
        if not (gpu and ref and gpu["updates_per_s"] and ref["updates_per_s"]):
            continue
        lines.append(
            f"- {name}: {gpu['updates_per_s']:.0f} updates/s on the GPU against "
            f"{ref['updates_per_s']:.0f} on one CPU core here; best validation "
            f"{gpu.get('metric')} {_pct(gpu.get('best_valid'))} vs {_pct(ref.get('best_valid'))}, "
            f"test {_pct(gpu.get('test_there'))} vs {_pct(ref.get('test_there'))} (other "
            "kernels, other rounding: close, not bit-identical)."
        )
    return lines


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _best(events: list[Any], select: dict[str, str] | None) -> dict[str, Any]:
    """The best validation point by the job's selection (accuracy unless the job names
    another: a causal LM's exact match), and the test value of that metric there."""
    from sweeper.selection import ACCURACY, Selection, base_name
    from sweeper.trainers.events import best_validation

    selection = ACCURACY if select is None else Selection(select["metric"], select["mode"])
    found = best_validation(events, selection)
    if found is None:
        return {}
    valid, test = found
    name = base_name(selection.metric)
    return {
        "metric": name,
        "best_step": valid.step,
        "best_valid": valid.value(name),
        "test_there": None if test is None else test.value(name),
    }


def _stack() -> dict[str, str]:
    """Where the jobs ran: the GPU machine's own Python and libraries, not this one's."""
    import platform
    from importlib import metadata

    found = {"machine": f"{platform.node()} ({platform.machine()})"}
    found["python"] = platform.python_version()
    for name in ("torch", "transformers", "peft"):
        found[name] = metadata.version(name)
    return found


def _rates(events: list[Any]) -> list[float]:
    from bench_frameworks import interval_rates

    return interval_rates(events)


def _gpu_name() -> str:
    done = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ) if shutil.which("nvidia-smi") else None  # fmt: skip
    return done.stdout.strip() if done is not None and done.returncode == 0 else "none"


class _MemorySampler:
    """The largest GPU memory in use (MiB, whole device) while a job runs."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            done = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode == 0 and done.stdout.strip():
                self.peak = max(self.peak, int(done.stdout.split()[0]))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("prepare", "run", "report"))
    parser.add_argument("paths", nargs="+", type=Path, help="DIR (prepare, run) or results files")
    parser.add_argument("--device", default="cuda", help="run: cuda, or cpu for the reference")
    parser.add_argument("--no-doc", action="store_true", help="report: print only")
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(args.paths[0].resolve())
    elif args.step == "run":
        run(args.paths[0].resolve(), args.device)
    else:
        import common

        command = "python bench/gpu_trainers.py prepare|run|report (see below)"
        head = common.header(TITLE, command, common.machine(), common.load_average())
        common.publish(TITLE, "\n".join([*head, "", report(args.paths)]), not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
