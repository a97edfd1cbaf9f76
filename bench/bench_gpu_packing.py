"""GPU packing: trials per hour with 1, 2 and 4 trials sharing each GPU (fractional GPUs).

    python bench/bench_gpu_packing.py            # 8 trials per packing, 5 epochs each
    python bench/bench_gpu_packing.py --quick    # 2 trials, 1 epoch, packings 1 and 2

Runs only where `torch.cuda.is_available()`; elsewhere it prints "no GPU: skipped" and
writes this method into its section. Method: the lab's RoBERTa small arch (sweeps/
roberta.yaml: 4 layers, 512 dim, FFN 512, 8 heads) on the demo's generated data
(1,800 training sentences, batch 8, 225 updates per epoch), random init, seeds 1-4 ×
{fairseq, hf}. For each packing k in 1, 2, 4 the same sweep runs in a fresh output
folder with `resources.gpu: 1/k`, `resources.cpu: 2` and `--max-concurrent k × GPUs`,
so Ray places k trials on each GPU at once. Reported: sweep wall, trials per hour
(trials / wall), the gain over k = 1, mean GPU utilisation and peak GPU memory
(nvidia-smi, sampled every second).

Two differences from the lab, both making a trial lighter than the lab's: the demo's
dictionary gives a 1,002-token vocabulary instead of 32,000 (a 0.5M-parameter
embedding table instead of 16.4M, so a smaller optimizer step), and max_positions
stays 64 (the demo's sentences have at most 21 tokens). Packing pays off when one
trial leaves the GPU idle (small batches, Python-side work, evaluation); the lighter
the trial, the more it pays, so these figures are an upper bound for the lab's model.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

import common

TITLE = "GPU packing"
PACKINGS, QUICK_PACKINGS = (1, 2, 4), (1, 2)
SEEDS, QUICK_SEEDS = [1, 2, 3, 4], [1]
EPOCHS, QUICK_EPOCHS = 5, 1
LAB_ARCH = {"layers": 4, "embed_dim": 512, "ffn_dim": 512, "heads": 8}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    parser.add_argument("--packings", type=int, nargs="+", help=f"default {PACKINGS}")
    return parser


def changes(packing: int, gpus: int, seeds: list[int], epochs: int) -> dict[str, Any]:
    out: dict[str, Any] = {f"model.arch.{k}": v for k, v in LAB_ARCH.items()}
    out["train.epochs"] = epochs
    out["grid"] = {"seed": seeds, "init": ["random"], "framework": ["fairseq", "hf"]}
    out["resources"] = {"cpu": 2, "gpu": 1 / packing}
    out["max_concurrent"] = packing * gpus
    out["retries"] = 0
    return out


def trials_per_hour(trials: int, wall: float) -> float:
    return 3600 * trials / wall


def run_packing(args: argparse.Namespace, packing: int, gpus: int) -> dict[str, Any]:
    seeds = QUICK_SEEDS if args.quick else SEEDS
    epochs = QUICK_EPOCHS if args.quick else EPOCHS
    spec, _ = common.new_sweep(
        args.workdir / "gpu-packing", f"packing-{packing}", changes(packing, gpus, seeds, epochs)
    )
    with common.GpuSampler() as sampler:
        timed = common.run_timed(common.sweeper_command("run", spec), env=common.clean_env())
    util, memory = sampler.summary()
    trials = 2 * len(seeds)
    return {"wall": timed.wall, "trials": trials, "util": util, "memory": memory}


def report(results: dict[int, dict[str, Any]], head: list[str], skipped: bool) -> str:
    lines = [*head, "", __doc__.split("\n\n", 2)[2].strip(), ""]
    if skipped:
        lines += ["No GPU on this machine: skipped; the method above is what runs where one is."]
        return "\n".join(lines) + "\n"
    base = results[min(results)]
    base_rate = trials_per_hour(base["trials"], base["wall"])
    rows = []
    for packing, found in results.items():
        rate = trials_per_hour(found["trials"], found["wall"])
        rows.append(
            [
                packing,
                f"{1 / packing:g}",
                found["trials"],
                f"{found['wall']:.0f}",
                f"{rate:.0f}",
                f"{common.ratio(rate, base_rate):.2f}",
                f"{found['util']:.0f}",
                f"{found['memory']:.0f}",
            ]
        )
    lines += common.table(
        [
            "trials per GPU",
            "resources.gpu",
            "trials",
            "sweep wall (s)",
            "trials/hour",
            "vs 1 per GPU",
            "GPU util, median (%)",
            "peak GPU memory (MiB)",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    info, start_load = common.machine(), common.load_average()
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    results: dict[int, dict[str, Any]] = {}
    if gpus == 0:
        print("no GPU: skipped")
    else:
        print(f"demo inputs ready in {common.ensure_inputs():.1f} s (not timed)", flush=True)
        shutil.rmtree(args.workdir / "gpu-packing", ignore_errors=True)
        for packing in args.packings or (QUICK_PACKINGS if args.quick else PACKINGS):
            results[packing] = found = run_packing(args, packing, gpus)
            print(f"{packing} per GPU: {found['wall']:.0f} s for {found['trials']} trials")
    command = common.command_line("bench_gpu_packing.py", argv)
    text = report(results, common.header(TITLE, command, info, start_load), skipped=gpus == 0)
    common.publish(TITLE, text, not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
