"""What every bench/ script shares: the machine description, its section of
docs/benchmarks.md, timed subprocesses, CPU utilisation, and the bench workspace.

The workspace gives each timed sweep a fresh output folder (fresh MLflow store, fresh
trial folders) that already holds the demo's prepared data, pretrained checkpoint and
initial weights, copied from the cache `make demo` fills (runs/demo). Those folders
are content-addressed, so a copy is exactly what `prepare()` would rebuild: a sweep
then only checks the cache, as a second `sweeper run` of the demo does. Filling the
cache (`ensure_inputs`) happens once, outside every timed part.

Scripts put `bench/` on sys.path by being run as `python bench/NAME.py`; this module
is imported as `common`, and puts the repository root on sys.path for what the
benchmarks share with the tests (tests/support/processes.py: the CLI command, the clean
environment, stopping a process group). bench/ imports tests.support, never the reverse.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import processes  # noqa: E402
from tests.support.processes import kill_group  # noqa: E402
from tests.support.processes import sweeper_command as sweeper_command  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
DEMO_SPEC = ROOT / "sweeps" / "demo.yaml"
CACHE = ROOT / "runs" / "demo"
"""`make demo`'s output folder: its prepared/, pretrained/ and init/ are reused."""
SHARED_INPUTS = ("prepared", "pretrained", "init")
WORKDIR = ROOT / "runs" / "bench"
VERSIONS = ("torch", "ray", "mlflow", "transformers", "fairseq-fixed")


# --- the machine and the doc section -------------------------------------------------


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> dict[str, str]:
    """What the figures depend on; read without importing torch (versions come from
    package metadata, the GPU from nvidia-smi)."""
    model = "unknown"
    memory = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    info = {
        "cpu": f"{model}, {len(os.sched_getaffinity(0))} cores usable ({os.cpu_count()} in all)",
        "memory": memory,
        "gpu": gpu_name(),
        "python": platform.python_version(),
    }
    for name in VERSIONS:
        try:
            info[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            info[name] = "not installed"
    return info


def gpu_name() -> str:
    if shutil.which("nvidia-smi") is None:
        return "none"
    found = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return "; ".join(found.stdout.strip().splitlines()) or "none"


class GpuSampler:
    """nvidia-smi's utilisation and memory of every GPU, every `every` seconds, in a
    background thread; no samples where nvidia-smi is missing (a CPU machine)."""

    def __init__(self, every: float = 1.0) -> None:
        self.samples: list[tuple[float, float]] = []
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GpuSampler:
        if shutil.which("nvidia-smi") is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used"]
        while not self._stop.wait(self.every):
            found = subprocess.run(
                [*query, "--format=csv,noheader,nounits"], capture_output=True, text=True
            )
            for line in found.stdout.strip().splitlines():
                util, memory = (float(x) for x in line.split(","))
                self.samples.append((util, memory))

    def summary(self) -> tuple[float, float]:
        """(median utilisation %, peak memory MiB) over all GPUs and samples."""
        if not self.samples:
            return float("nan"), float("nan")
        return median([u for u, _ in self.samples]), max(m for _, m in self.samples)


def header(
    title: str,
    command: str,
    info: Mapping[str, str],
    start_load: str,
    ran: tuple[str, str, int] | None = None,
) -> list[str]:
    """A section's opening lines: title, command, date, machine, load at start and end,
    and a warning when the machine was shared (load above the usable cores). `ran`:
    (date, load at end, usable cores) of figures measured on another machine (the GPU
    check's), instead of now and this machine."""
    date, end_load, cores = ran or (
        time.strftime("%Y-%m-%d %H:%M"),
        load_average(),
        len(os.sched_getaffinity(0)),
    )
    lines = [f"## {title}", "", f"Command: `{command}` ({date})", ""]
    lines += [f"- {key}: {value}" for key, value in info.items()]
    lines += [f"- load average at start (1, 5, 15 min): {start_load}"]
    lines += [f"- load average at end: {end_load}"]
    if max(float(start_load.split(",")[0]), float(end_load.split(",")[0])) > cores:
        lines += [
            "",
            "The machine was shared while this ran (load average above the usable cores): "
            "wall times include waiting for a core, so ratios and speedups are distorted.",
        ]
    return lines


def replace_section(current: str, title: str, text: str) -> str:
    """`current` (a whole document) with its `## title` section replaced by `text`, or
    `text` appended when there is none; other sections are kept as they are."""
    marker = f"## {title}\n"
    text = text.rstrip("\n") + "\n"
    if current.startswith(marker) or f"\n{marker}" in current:
        start = 0 if current.startswith(marker) else current.index(f"\n{marker}") + 1
        end = current.find("\n## ", start + len(marker))
        tail = current[end + 1 :] if end != -1 else ""
        before = current[:start].rstrip("\n")
        return (before + "\n\n" if before else "") + text + ("\n" + tail if tail else "")
    before = current.rstrip("\n")
    return (before + "\n\n" if before else "") + text


def write_section(title: str, text: str, doc: Path = DOC) -> None:
    """Replace (or append) this script's section of docs/benchmarks.md."""
    doc.parent.mkdir(parents=True, exist_ok=True)
    current = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    doc.write_text(replace_section(current, title, text), encoding="utf-8")


def publish(title: str, text: str, write: bool) -> None:
    """Print a section and, when `write` (no --no-doc), put it into docs/benchmarks.md in
    place of the last one."""
    print()
    print(text)
    if write:
        write_section(title, text)
        print(f"updated {DOC.relative_to(ROOT)}")


def command_line(script: str, argv: Sequence[str]) -> str:
    """How the section was produced, as a user would type it."""
    return " ".join(["python", f"bench/{script}", *argv])


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the script")
    parser.add_argument("--no-doc", action="store_true", help="print only")
    parser.add_argument(
        "--workdir", type=Path, default=WORKDIR, help=f"scratch folder (default {WORKDIR})"
    )


# --- figures ------------------------------------------------------------------------


def ratio(value: float, reference: float) -> float:
    """value / reference; a reference of 0 is a broken measurement, not infinity."""
    if reference <= 0:
        raise ValueError(f"reference time must be positive, got {reference}")
    return value / reference


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def verdict(value: float, limit: float, higher_is_better: bool = False) -> str:
    held = value >= limit if higher_is_better else value <= limit
    return "holds" if held else "missed"


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> list[str]:
    """A markdown table; `align` holds one of 'l'/'r' per column (default: first left,
    the rest right)."""
    align = align or "l" + "r" * (len(head) - 1)
    lines = ["| " + " | ".join(head) + " |"]
    lines.append("|" + "".join("---|" if a == "l" else "---:|" for a in align))
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


# --- processes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Counters:
    """One reading of a process's kernel counters."""

    at: float
    """perf_counter seconds"""
    cpu: float
    """user + sys seconds of the whole process (exited threads included)"""
    waited: float
    """seconds its live threads spent runnable but waiting for a core (schedstat's
    run_delay): the time another process held the core it wanted"""


@dataclass(frozen=True)
class Traced:
    """A process of a timed run, as the first and last scans that saw it read it."""

    command: str
    first: Counters
    last: Counters

    @property
    def span(self) -> float:
        return self.last.at - self.first.at

    def share(self, name: str) -> float:
        """CPU or waiting seconds per second seen (`name`: "cpu" or "waited")."""
        spent = getattr(self.last, name) - getattr(self.first, name)
        return spent / self.span if self.span > 0 else float("nan")


@dataclass(frozen=True)
class Timed:
    """A finished subprocess: wall seconds, CPU seconds of its process tree (user + sys
    of every descendant seen by a once-a-second scan, trainers and Ray workers included;
    processes living under a second can be missed), its output, its start time (epoch
    seconds), and the processes `run_timed` was asked to trace."""

    wall: float
    cpu: float
    output: str
    started: float
    traced: tuple[Traced, ...] = ()


def run_timed(
    command: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 1800,
    trace: Callable[[str], bool] | None = None,
) -> Timed:
    """Run to completion in its own process group; raise with the output's tail on a
    non-zero exit (a failed run is not a timing). `trace`: which processes of the tree
    (by command line) to follow with `Counters` at each scan."""
    started = time.time()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(c) for c in command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
    )
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    cpu: dict[int, float] = {}
    traced: dict[int, Traced] = {}
    try:
        while True:
            live = tree_cpu(proc.pid)
            cpu.update(live)
            if trace is not None:
                _follow(live, trace, traced)
            try:
                proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if time.perf_counter() - start > timeout:
                    raise
    finally:
        if proc.poll() is None:
            kill_group(proc.pid)
            proc.wait()
    wall = time.perf_counter() - start
    reader.join()
    output = "".join(chunks)
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-40:])
        raise RuntimeError(f"{' '.join(map(str, command))} exited {proc.returncode}:\n{tail}")
    return Timed(wall, sum(cpu.values()), output, started, tuple(traced.values()))


def run_together(commands: Sequence[Sequence[str | Path]], **kwargs: Any) -> list[Timed]:
    """Start every command at once (`run_timed` each, one thread per command) and wait
    for all; their joint wall is `together_wall` of the result."""
    results: list[Timed | BaseException] = [RuntimeError("not run")] * len(commands)

    def one(i: int) -> None:
        try:
            results[i] = run_timed(commands[i], **kwargs)
        except BaseException as error:  # re-raised below, on the caller's thread
            results[i] = error

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(commands))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for found in results:
        if isinstance(found, BaseException):
            raise found
    return results  # type: ignore[return-value]


def together_wall(timed: Sequence[Timed]) -> float:
    """From the first start to the last end of processes run at once."""
    return max(t.started + t.wall for t in timed) - min(t.started for t in timed)


TRAINERS = (
    "fairseq-train",
    "hf_plain.py",
    "sweeper.trainers.fairseq.fairseq_main",
    "sweeper.trainers.hf.hf_main",
)
"""Command lines of trainer processes, bare (stock fairseq-train, bench/hf_plain.py) or
started by sweeper: the processes `run_timed(trace=is_trainer)` reads counters of."""


def is_trainer(command: str) -> bool:
    return any(name in command for name in TRAINERS)


def counters(traced: Traced) -> dict[str, float]:
    """A traced process's seconds seen, and its CPU and run-queue seconds per second."""
    return {"seen": traced.span, "cpu": traced.share("cpu"), "waited": traced.share("waited")}


def _follow(
    tree: Mapping[int, float], wanted: Callable[[str], bool], traced: dict[int, Traced]
) -> None:
    """Read the counters of each wanted process in `tree` (pid -> CPU s) into `traced`."""
    for pid in tree:
        known = traced.get(pid)
        command = known.command if known else _command(pid)
        if command is None or not wanted(command):
            continue
        now = _counters(pid)
        if now is not None:
            traced[pid] = Traced(command, known.first if known else now, now)


def _command(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return None


def _counters(pid: int) -> Counters | None:
    """CPU seconds (/proc/PID/stat) and run-queue wait (/proc/PID/task/*/schedstat)."""
    at = time.perf_counter()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        waited = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError):  # a thread that just ended
                waited += int((task / "schedstat").read_text().split()[1])
    except (OSError, IndexError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return Counters(at, (int(fields[11]) + int(fields[12])) / tick, waited / 1e9)


def tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds (user + sys) of `root` and each of its live descendants, from /proc."""
    parents: dict[int, int] = {}
    seconds: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while being read
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        seconds[pid] = (int(fields[11]) + int(fields[12])) / tick
    tree, frontier = {root}, [root]
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in tree:
                tree.add(child)
                frontier.append(child)
    return {pid: seconds[pid] for pid in tree if pid in seconds}


def code_of(rev: str, folder: Path, *also: str) -> Path:
    """`src/` of git revision `rev`, unpacked into `folder` (with the repository paths
    `also`, e.g. `tests/support`, beside it: `folder` then goes on PYTHONPATH too)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src", *also], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src"


def clean_env(threads: int | None = None) -> dict[str, str]:
    """Environment of a timed run: the tests' clean environment (local Ray, local store,
    no telemetry); with `threads`, the trial's thread pinning
    (sweeper.trainers.runner.thread_env)."""
    env = processes.clean_env()
    if threads is not None:
        from sweeper.trainers.runner import thread_env

        env = thread_env(threads, env)
    return env


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def utilisation(before: tuple[float, float], after: tuple[float, float]) -> float:
    """Machine-wide busy fraction (0-1) between two `cpu_times()` readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else float("nan")


# --- the workspace ------------------------------------------------------------------


def demo_raw() -> dict[str, Any]:
    """sweeps/demo.yaml as a mapping with every path made absolute, so a derived sweep
    file can live anywhere and still read the demo's corpus."""
    raw = yaml.safe_load(DEMO_SPEC.read_text(encoding="utf-8"))
    base = DEMO_SPEC.parent
    raw["output_dir"] = str((base / raw["output_dir"]).resolve())
    raw["data"]["dir"] = str((base / raw["data"]["dir"]).resolve())
    for key in ("sentencepiece", "dictionary"):
        raw["model"][key] = str((base / raw["model"][key]).resolve())
    return raw


def set_dotted(raw: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `raw` with `{"train.epochs": 2, ...}` applied (missing levels created)."""
    out = copy.deepcopy(raw)
    for dotted, value in changes.items():
        node = out
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def ensure_inputs() -> float:
    """Fill the demo cache (prepared data, pretrained checkpoint) if needed, in a child
    process (preparing imports fairseq, which reconfigures logging). Returns seconds."""
    code = (
        "from sweeper.spec.load import load_spec; "
        "from sweeper.trainers.trial_pipeline import prepare_inputs; "
        f"prepare_inputs(load_spec({str(DEMO_SPEC)!r}))"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=clean_env())
    return time.perf_counter() - start


def warm_imports() -> None:
    """Import the heavy libraries once, untimed, so the first timed run does not pay for
    reading them from a cold disk cache."""
    code = "import torch, transformers, fairseq_cli.train, ray, mlflow"
    subprocess.run([sys.executable, "-c", code], check=True, env=clean_env())


def new_sweep(workdir: Path, name: str, changes: Mapping[str, Any]) -> tuple[Path, Path]:
    """A sweep file `workdir/name.yaml` (demo spec plus `changes`, named `name`) whose
    fresh output folder holds copies of the cached shared inputs; returns (file, out)."""
    out = workdir / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for folder in SHARED_INPUTS:
        if (CACHE / folder).is_dir():
            shutil.copytree(CACHE / folder, out / folder)
    raw = set_dotted(demo_raw(), {"name": name, "output_dir": str(out), **changes})
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path, out
