"""What the GPU machine lacks, carried as files: collected here, installed there.

The GPU machine has Python 3.12, torch, transformers, PEFT, numpy, Cython, a compiler
and fairseq's other text requirements, but no fairseq, no hydra/omegaconf, and no
network. `collect` (here) puts into one folder, at this venv's versions:

- fairseq-fixed's pinned sdist (tools/fairseq_wheel.py checks it by sha256): its Cython
  extensions are compiled for the GPU machine's Python there, by the same tool
  (`--sdist`), trimmed of the torch C++ extensions exactly as `make install` builds it;
- wheels for CPython 3.12 on manylinux x86-64 (`pip download --only-binary`) of
  fairseq's needs hydra-core, omegaconf and bitarray, and of pydantic and its needs
  (the trainers read their arch through `sweeper.spec.model_block`);
- antlr4-python3-runtime (hydra's grammar runtime), which exists only as an sdist:
  pure Python, so `pip wheel` here makes a wheel any Python 3 installs.

`install` (there) builds the fairseq wheel and installs every wheel with
`pip install --no-index --no-deps --target`, then puts that folder first on sys.path
and on PYTHONPATH, so the trainer subprocesses import the same packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "3.12"
BINARY = (
    "hydra-core", "omegaconf", "bitarray",
    "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions",
)  # fmt: skip
SDIST_ONLY = ("antlr4-python3-runtime",)
PLATFORMS = (
    "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
    "manylinux2014_x86_64", "manylinux1_x86_64",
)  # fmt: skip


def _fairseq_wheel_tool():  # tools/ is not a package on the GPU machine's path
    sys.path.insert(0, str(ROOT))
    from tools import fairseq_wheel

    return fairseq_wheel


def pinned(names: tuple[str, ...]) -> list[str]:
    """`name==version` of each package as installed in this interpreter."""
    return [f"{name}=={metadata.version(name)}" for name in names]


def collect(folder: Path) -> list[Path]:
    """Fill `folder` with the sdist and wheels above; returns the files."""
    folder.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run(
        [*pip, "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--python-version", PYTHON, "--implementation", "cp", *platforms,
         "--dest", str(folder), *pinned(BINARY)],
        check=True,
    )  # fmt: skip
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder), *pinned(SDIST_ONLY)],
        check=True,
    )
    _fairseq_wheel_tool().download_sdist(folder)
    return sorted(folder.iterdir())


def install(folder: Path, target: Path) -> dict[str, float]:
    """Build fairseq from the carried sdist, install it and the carried wheels into
    `target`, and make `target` importable here and in every child; returns seconds."""
    tool = _fairseq_wheel_tool()
    started = time.monotonic()
    built = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "fairseq_wheel.py"),
         "--sdist", str(folder / tool.SDIST), "--cache-dir", str(target.parent / "wheels")],
        check=True, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    wheel = built.stdout.strip().splitlines()[-1]
    compiled = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(target),
         *map(str, sorted(folder.glob("*.whl"))), wheel],
        check=True,
    )  # fmt: skip
    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(target), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    return {
        "fairseq_build_s": round(compiled - started, 1),
        "pip_install_s": round(time.monotonic() - compiled, 1),
    }
