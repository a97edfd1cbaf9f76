"""Stage graph: `make demo` cold, with the pretraining stage beside the random-init trials.

    python bench/bench_stages.py                    # the demo, cold, with this checkout
    python bench/bench_stages.py --baseline c5bd0ef # also with that commit's code, compared
    python bench/bench_stages.py --quick            # 1 epoch, 200 pretraining steps

What `make demo` runs after install (`sweeper run sweeps/demo.yaml`), in a fresh folder:
nothing cached (corpus generated, sentencepiece trained, data binarized, RoBERTa
pretrained, 12 trials), timed from the command's start to its exit. With `--baseline
REV`, REV's `src/` (from `git archive`) runs the same sweep in a second fresh folder
(its code first on PYTHONPATH, this checkout's installed libraries), and the two records
are compared: the pretrained weights (sha256 of the checkpoint's tensors) and Table 1
(`sweeper summarize --format json`): every trial's best-validation step and accuracy
and its test accuracy.
Identical records are the acceptance point of issue 18 ("records are unchanged by the
speed work"). Target: `make demo` <= 3 min on 2 cores, cold.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import common
import yaml

TITLE = "Stage graph"
TARGET_S = 180.0
QUICK = {"train.epochs": 1, "model.pretrain.steps": 200}
TABLE1 = ("best_step", "best_valid_accuracy", "test_accuracy")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser)
    parser.add_argument("--baseline", metavar="REV", help="also run REV's code and compare")
    return parser


def cold_sweep(folder: Path, changes: dict[str, Any]) -> Path:
    """The demo spec with every output (corpus included) under an empty `folder`."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    corpus = folder / "corpus"
    raw = common.set_dotted(
        common.demo_raw(),
        {
            "output_dir": str(folder),
            "data.dir": str(corpus),
            "model.sentencepiece": str(corpus / "sentencepiece.bpe.model"),
            "model.dictionary": str(corpus / "dict.txt"),
            **changes,
        },
    )
    path = folder / "demo.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def run_demo(spec: Path, src: Path | None) -> dict[str, Any]:
    """Run the sweep cold; wall, CPU, the pretraining's own seconds, Table 1."""
    env = common.clean_env()
    if src is not None:
        env["PYTHONPATH"] = str(src)
    load = common.load_average()
    timed = common.run_timed(common.sweeper_command("run", spec), env=env)
    out = spec.parent
    (info,) = out.glob("pretrained/*/pretrain.json")
    summary = subprocess.run(
        common.sweeper_command("summarize", spec, "--format", "json", "--no-log"),
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    trials = json.loads(summary.stdout)["trials"]
    return {
        "wall": timed.wall,
        "cpu": timed.cpu,
        "load": load,
        "pretrain_s": json.loads(info.read_text(encoding="utf-8"))["seconds"],
        "checkpoint": weights_sha256(info.parent / "model.pt"),
        "table1": {f"{t['group']}/s{t['seed']}": [t[k] for k in TABLE1] for t in trials},
    }


def weights_sha256(path: Path) -> str:
    """sha256 of a fairseq checkpoint's tensors, by name (the file itself also holds
    the run's arguments, paths included, which differ between two folders)."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)["model"]
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode() + b"\0" + state[name].numpy().tobytes())
    return digest.hexdigest()


def compare(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """Lines saying whether the two records are the same, and where not."""
    same_ckpt = new["checkpoint"] == old["checkpoint"]
    lines = [
        f"- pretrained weights (sha256 of the checkpoint's tensors): "
        f"{'identical' if same_ckpt else 'DIFFERENT'} "
        f"({new['checkpoint'][:12]})"
    ]
    differ = [
        f"{name}: {old['table1'].get(name)} -> {row}"
        for name, row in sorted(new["table1"].items())
        if old["table1"].get(name) != row
    ]
    if set(old["table1"]) != set(new["table1"]):
        differ.append(f"trials: {sorted(old['table1'])} -> {sorted(new['table1'])}")
    n = len(new["table1"])
    lines.append(
        f"- Table 1 ({n} trials: {', '.join(TABLE1)}): "
        + ("identical" if not differ else "DIFFERENT: " + "; ".join(differ))
    )
    return lines


def report(rows: dict[str, dict[str, Any]], changes: dict[str, Any], header: list[str]) -> str:
    lines = [
        *header,
        "",
        "`sweeper run` of sweeps/demo.yaml"
        + (f" with {changes}" if changes else "")
        + " in an empty folder: corpus generation, sentencepiece, binarizing, masked-LM "
        "pretraining (2,000 steps) and 12 trials, nothing cached; what `make demo` runs "
        "after install. Wall from the command's start to its exit; CPU seconds of its "
        "process tree; the pretraining's own seconds (its `pretrain.json`). Target: "
        f"<= {TARGET_S:.0f} s on 2 cores.",
        "",
        *common.table(
            ["code", "wall (s)", "CPU s", "pretraining (s)", "load at start", "<= 3 min"],
            [
                [
                    label,
                    f"{r['wall']:.1f}",
                    f"{r['cpu']:.0f}",
                    f"{r['pretrain_s']:.1f}",
                    r["load"],
                    common.verdict(r["wall"], TARGET_S),
                ]
                for label, r in rows.items()
            ],
        ),
    ]
    if len(rows) == 2:
        new, old = rows.values()
        lines += ["", "Records (acceptance: unchanged by the speed work):", ""]
        lines += compare(new, old)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    changes = dict(QUICK) if args.quick else {}
    common.warm_imports()
    info, start_load = common.machine(), common.load_average()
    work = args.workdir / "stages"
    rows: dict[str, dict[str, Any]] = {}
    rows["this checkout (stage graph)"] = run_demo(cold_sweep(work / "new", changes), None)
    print(f"stage graph: {rows['this checkout (stage graph)']['wall']:.1f} s", flush=True)
    if args.baseline:
        src = common.code_of(args.baseline, work / "code")
        label = f"{args.baseline} (pretraining before the trials)"
        rows[label] = run_demo(cold_sweep(work / "old", changes), src)
        print(f"{label}: {rows[label]['wall']:.1f} s", flush=True)
    command = common.command_line("bench_stages.py", argv)
    text = report(rows, changes, common.header(TITLE, command, info, start_load))
    common.publish(TITLE, text, not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
