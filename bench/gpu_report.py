"""The GPU check's section of docs/benchmarks.md, from the results file `run` wrote.

Kept apart from bench/gpu_trainers.py (which runs on the GPU machine) because it only
reads: every figure comes from the file, and the reading lines under the tables are
computed from the same numbers, so the text cannot drift from them.
"""

from __future__ import annotations

from typing import Any

import common

PRECISIONS = ("fp32", "bf16")


def best(events: list[Any]) -> dict[str, Any]:
    """The best validation accuracy of a run's events and the test accuracy there."""
    from sweeper.selection import ACCURACY, base_name
    from sweeper.trainers.events import best_validation

    found = best_validation(events, ACCURACY)
    if found is None:
        return {}
    valid, test = found
    name = base_name(ACCURACY.metric)
    return {
        "best_step": valid.step,
        "best_valid": valid.value(name),
        "test_there": None if test is None else test.value(name),
    }


def section(results: dict[str, Any], doc: str) -> str:
    command = (
        "python bench/gpu_trainers.py prepare DIR; on the GPU machine: python3 "
        "bench/gpu_trainers.py run DIR --out OUT; python bench/gpu_trainers.py report "
        "OUT/results-cuda.json"
    )
    info = {key: str(value) for key, value in results["machine"].items()}
    ran = (results["started"], results.get("ended_load", "?"), int(results.get("cores", 1)))
    lines = common.header("GPU check", command, info, results["load_start"], ran)
    lines += ["", doc.split("\n\n", 2)[2].strip(), "", *setup_line(results), ""]
    lines += [*solo_table(results["solo"]), "", *packed_table(results), ""]
    return "\n".join([*lines, *reading(results)]) + "\n"


def setup_line(results: dict[str, Any]) -> list[str]:
    setup = results["setup"]
    parts = [f"{key.removesuffix('_s').replace('_', ' ')} {s} s" for key, s in setup.items()]
    ran = f" (`{results['command']}`)" if results.get("command") else ""
    return [
        f"Device: {results['device']}{ran}; setup before the first run: {', '.join(parts)}; "
        f"whole run {results.get('run_s', '?')} s."
    ]


def solo_table(solo: dict[str, dict[str, Any]]) -> list[str]:
    rows = []
    for name, runs in solo.items():
        mine, bare = runs.get("sweeper", {}), runs.get("bare", {})
        rows.append([
            name, _state(mine), _state(bare), _num(mine.get("wall_s")), _num(bare.get("wall_s")),
            _ratio(mine.get("wall_s"), bare.get("wall_s")), _num(mine.get("updates_per_s")),
            "yes" if mine.get("on_cuda") else "no", _pct(mine.get("best_valid")),
            _pct(mine.get("test_there")),
            f"{_num(mine.get('peak_gpu_mib'))} / {_num(bare.get('peak_gpu_mib'))}",
        ])  # fmt: skip
    return common.table(
        ["job", "sweeper's trainer", "bare", "sweeper wall (s)", "bare wall (s)",
         "sweeper / bare", "sweeper updates/s (median)", "trainer on CUDA", "best valid acc",
         "test acc there", "peak GPU MiB sweeper / bare"],
        rows,
    )  # fmt: skip


def one_at_a_time(results: dict[str, Any]) -> tuple[float, float] | None:
    """(wall, trials/hour) of k = 1: the two fp32 trials of the solo table, one after the
    other; None unless both finished."""
    alone = [results["solo"].get(f"{f}, fp32", {}).get("sweeper", {}) for f in ("fairseq", "hf")]
    if not all(a.get("ok") for a in alone):
        return None
    wall = sum(a["wall_s"] for a in alone)
    return wall, 3600 * len(alone) / wall


def packed_rate(found: dict[str, Any]) -> float | None:
    """Trials per hour of a packing that ran (None if skipped or a trial failed)."""
    if not found.get("ok"):
        return None
    return 3600 * len(found["trials"]) / found["wall_s"]


def packed_table(results: dict[str, Any]) -> list[str]:
    """Trials per hour with k trials at once on the GPU, against k = 1."""
    rows, base = [], one_at_a_time(results)
    if base is not None:
        alone = [results["solo"][f"{f}, fp32"]["sweeper"] for f in ("fairseq", "hf")]
        rows.append(["1", "fairseq, hf (one after the other)", "yes", f"{base[0]:.1f}",
                     f"{base[1]:.0f}", "1.00", "-", "-",
                     " / ".join(_num(a.get("updates_per_s")) for a in alone)])  # fmt: skip
    for k, found in results["packed"].items():
        if "skipped" in found:
            rows.append([k, "-", f"skipped ({found['skipped']})", *["-"] * 6])
            continue
        rate = packed_rate(found)
        failed = [_brief(t.get("error")) for t in found["each"] if not t.get("ok")]
        rows.append([
            k, ", ".join(t.split(",")[0] for t in found["trials"]),
            "no: " + "; ".join(failed) if failed else "yes", f"{found['wall_s']:.1f}",
            "-" if rate is None else f"{rate:.0f}", _ratio(rate, base and base[1]),
            _num(found["gpu_util_median"]), _num(found["peak_gpu_mib"]),
            " / ".join(_num(t.get("updates_per_s")) for t in found["each"]),
        ])  # fmt: skip
    return common.table(
        ["trials on the GPU at once", "trials", "all finished", "wall (s)", "trials/hour",
         "vs 1 at a time", "GPU util median (%)", "peak GPU MiB", "each trial's updates/s"],
        rows,
    )  # fmt: skip


XLA = "xla_device"
"""The exception of stock fairseq-train given --bf16 without a TPU."""


def reading(results: dict[str, Any]) -> list[str]:
    """What the tables say, computed from them."""
    solo = results["solo"]
    runs = [r for pair in solo.values() for r in pair.values() if "skipped" not in r]
    skipped = sum("skipped" in r for pair in solo.values() for r in pair.values())
    lines = [
        f"- {sum(bool(r.get('ok')) for r in runs)} of {len(runs)} single runs finished "
        f"({skipped} skipped for time)."
    ]
    for name, pair in solo.items():
        mine, bare = pair.get("sweeper", {}), pair.get("bare", {})
        if mine.get("ok") and bare.get("ok"):
            lines.append(
                f"- {name}: sweeper's trainer {mine['wall_s']:.1f} s against the bare "
                f"framework's {bare['wall_s']:.1f} s ({_ratio(mine['wall_s'], bare['wall_s'])}x)."
            )
        elif mine.get("ok") and XLA in str(bare.get("error")):
            lines.append(
                f"- {name}: stock fairseq-train cannot run it: its --bf16 implies --tpu "
                "(torch_xla, absent), which sweeper's fairseq child undoes "
                "(`bf16_without_tpu` in sweeper.trainers.fairseq.fairseq_main)."
            )
    for framework in ("fairseq", "hf"):
        fp32, bf16 = (solo.get(f"{framework}, {p}", {}).get("sweeper", {}) for p in PRECISIONS)
        if fp32.get("updates_per_s") and bf16.get("updates_per_s"):
            lines.append(
                f"- {framework}, sweeper's trainer: {bf16['updates_per_s']:.1f} updates/s in "
                f"bf16 against {fp32['updates_per_s']:.1f} in fp32."
            )
    base = one_at_a_time(results)
    for k, found in results["packed"].items():
        rate = packed_rate(found)
        if rate is not None and base is not None:
            lines.append(
                f"- {k} trials at once: {rate:.0f} trials/hour, {rate / base[1]:.2f}x one at "
                f"a time; the GPU's median utilisation {_num(found['gpu_util_median'])} %."
            )
    return lines


def _brief(error: object) -> str:
    return str(error).replace("|", "/").replace("\n", " ")[:300]


def _state(run: dict[str, Any]) -> str:
    if not run:
        return "-"
    if "skipped" in run:
        return f"skipped ({run['skipped']})"
    return "finished" if run.get("ok") else f"failed: {_brief(run.get('error'))}"


def _num(value: float | None) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(value: float | None, reference: float | None) -> str:
    if not value or not reference:
        return "-"
    return f"{value / reference:.2f}"
