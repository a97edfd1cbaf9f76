"""Build (or find in the cache) sweeper's fairseq wheel, without fairseq's torch C++ extensions.

    .venv/bin/python tools/fairseq_wheel.py        (`make install` runs it; prints the wheel's path)

fairseq-fixed 0.12.3.1 ships only as an sdist. Its setup.py compiles three torch C++
extensions (fairseq.libbase, fairseq.libnat, alignment_train_cpu_binding; three more CUDA
ones where CUDA_HOME is set) that take about 6 of the 6.5 minutes a plain build takes on 2
cores. sweeper never imports them: fairseq loads them lazily, only for base layers,
non-autoregressive models and the simultaneous-translation examples. This script:

1. downloads the pinned sdist with pip (no dependencies), or takes a local copy
   (`--sdist`, for a machine without network), and checks its sha256;
2. removes exactly those extension blocks from setup.py, failing when setup.py is not
   the text expected; the Cython extensions (fairseq.data.data_utils_fast,
   token_block_utils_fast) and libbleu stay;
3. builds the wheel with `pip wheel --no-deps --no-build-isolation`, against the numpy,
   Cython and torch of the Python that runs this script (the venv's);
4. keeps the wheel under $XDG_CACHE_HOME/sweeper/wheels (default ~/.cache), in a folder
   named by the fairseq version, the Python version, the numpy version (the compiled
   extensions use numpy's C API) and the recipe below, so a later install reuses it.

The wheel's path is the last line printed on stdout; pip's output goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

FAIRSEQ = "fairseq-fixed"
VERSION = "0.12.3.1"
SDIST = f"fairseq_fixed-{VERSION}.tar.gz"
SDIST_SHA256 = "c607577a54ab30e2ee0f0b0a754ea5cdbc6ad0a9f99a1726638a2201445bc1cc"
# Bump when the edit below changes, so cached wheels built the old way are not reused.
RECIPE = "no-torch-ext-1"

# The two blocks removed from setup.py (line endings normalised to \n), each exactly once.
TORCH_CPU_EXTENSIONS = """
extensions.extend(
    [
        cpp_extension.CppExtension(
            "fairseq.libbase",
            sources=[
                "fairseq/clib/libbase/balanced_assignment.cpp",
            ],
        ),
        cpp_extension.CppExtension(
            "fairseq.libnat",
            sources=[
                "fairseq/clib/libnat/edit_dist.cpp",
            ],
        ),
        cpp_extension.CppExtension(
            "alignment_train_cpu_binding",
            sources=[
                "examples/operators/alignment_train_cpu.cpp",
            ],
        ),
    ]
)
"""
TORCH_CUDA_EXTENSIONS = """
if "CUDA_HOME" in os.environ:
    extensions.extend(
        [
            cpp_extension.CppExtension(
                "fairseq.libnat_cuda",
                sources=[
                    "fairseq/clib/libnat_cuda/edit_dist.cu",
                    "fairseq/clib/libnat_cuda/binding.cpp",
                ],
            ),
            cpp_extension.CppExtension(
                "fairseq.ngram_repeat_block_cuda",
                sources=[
                    "fairseq/clib/cuda/ngram_repeat_block_cuda.cpp",
                    "fairseq/clib/cuda/ngram_repeat_block_cuda_kernel.cu",
                ],
            ),
            cpp_extension.CppExtension(
                "alignment_train_cuda_binding",
                sources=[
                    "examples/operators/alignment_train_kernel.cu",
                    "examples/operators/alignment_train_cuda.cpp",
                ],
            ),
        ]
    )
"""
# What must remain: the extensions sweeper uses.
KEPT_EXTENSIONS = (
    '"fairseq.libbleu"',
    '"fairseq.data.data_utils_fast"',
    '"fairseq.data.token_block_utils_fast"',
)


class RecipeError(RuntimeError):
    """The sdist or its setup.py is not the one this script was written for."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sweeper" / "wheels"


def cache_key() -> str:
    """fairseq version, Python version and numpy version of this interpreter, and RECIPE."""
    import numpy  # the venv's: the wheel's Cython extensions are compiled against it

    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_")
    return f"{FAIRSEQ}-{VERSION}-{python}-{platform}-numpy{numpy.__version__}-{RECIPE}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trim_setup_py(text: str) -> str:
    """setup.py's text without the torch C++/CUDA extensions; RecipeError if it differs
    from the setup.py of fairseq-fixed 0.12.3.1 in any way that matters here."""
    text = text.replace("\r\n", "\n")
    for block in (TORCH_CPU_EXTENSIONS, TORCH_CUDA_EXTENSIONS):
        count = text.count(block)
        if count != 1:
            first = block.strip().splitlines()[0]
            raise RecipeError(
                f"setup.py: expected the block starting {first!r} once, found {count}"
            )
        text = text.replace(block, "\n")
    if "CppExtension" in text or "CUDAExtension" in text:
        raise RecipeError("setup.py still declares a torch extension after trimming")
    missing = [name for name in KEPT_EXTENSIONS if name not in text]
    if missing:
        raise RecipeError(f"setup.py lacks the extensions sweeper needs: {', '.join(missing)}")
    return text


def run(command: list[str], **kwargs: object) -> None:
    print("+", " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=sys.stderr, **kwargs)  # type: ignore[call-overload]


def download_sdist(into: Path) -> Path:
    """The pinned sdist, downloaded with pip into `into` and checked; returns its path."""
    # --no-build-isolation: pip prepares the sdist's metadata, whose setup.py imports torch,
    # with this interpreter's packages instead of downloading torch into a build env.
    run(
        [sys.executable, "-m", "pip", "download", f"{FAIRSEQ}=={VERSION}", "--no-deps",
         "--no-binary", ":all:", "--no-build-isolation", "--quiet", "--dest", str(into)]
    )  # fmt: skip
    sdist = into / SDIST
    if not sdist.is_file():
        raise RecipeError(f"pip download left no {SDIST} in {into}: {os.listdir(into)}")
    return checked_sdist(sdist)


def checked_sdist(sdist: Path) -> Path:
    """`sdist` itself if it is the pinned file (by sha256); RecipeError otherwise."""
    digest = sha256_of(sdist)
    if digest != SDIST_SHA256:
        raise RecipeError(f"{sdist.name}: sha256 {digest}, expected {SDIST_SHA256}")
    return sdist


def build_wheel(work: Path, sdist: Path | None = None) -> Path:
    """The trimmed wheel, built in `work` from `sdist` (a local copy of the pinned file,
    as on a machine without network), or from a fresh download when None."""
    sdist = download_sdist(work / "sdist") if sdist is None else checked_sdist(sdist)
    with tarfile.open(sdist) as tar:
        tar.extractall(work / "src", filter="data")
    source = work / "src" / SDIST.removesuffix(".tar.gz")
    setup_py = source / "setup.py"
    setup_py.write_text(trim_setup_py(setup_py.read_text()))
    env = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--no-cache-dir", "--quiet", "--wheel-dir", str(work / "dist"), str(source)],
        env=env,
    )  # fmt: skip
    wheels = list((work / "dist").glob("*.whl"))
    if len(wheels) != 1:
        raise RecipeError(f"pip wheel made {len(wheels)} wheels: {wheels}")
    return wheels[0]


def cached_wheel(cache_dir: Path, rebuild: bool = False, sdist: Path | None = None) -> Path:
    """The trimmed wheel for this interpreter, built first if the cache lacks it (from
    `sdist` where given, see `build_wheel`)."""
    folder = cache_dir / cache_key()
    found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if found and not rebuild:
        return found[0]
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fairseq-wheel-", dir=cache_dir) as tmp:
        wheel = build_wheel(Path(tmp), sdist)
        # Into place whole: a build killed half-way leaves no wheel behind to be reused.
        staged = Path(tmp) / "staged"
        staged.mkdir()
        shutil.move(wheel, staged / wheel.name)
        if folder.exists():
            shutil.rmtree(folder)
        try:
            os.replace(staged, folder)
        except OSError:
            # Another install put the same wheel there meanwhile: use that one.
            if not (folder / wheel.name).is_file():
                raise
    return folder / wheel.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Run it with the venv's Python: the wheel is built against that numpy and torch.",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=default_cache_dir(),
        help="where built wheels are kept (default: $XDG_CACHE_HOME/sweeper/wheels, "
        "$XDG_CACHE_HOME defaulting to ~/.cache; now %(default)s)",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="build again even when the cache has the wheel"
    )
    parser.add_argument(
        "--sdist",
        type=Path,
        help=f"build from this local {SDIST} (checked by sha256) instead of downloading it",
    )
    args = parser.parse_args(argv)
    try:
        wheel = cached_wheel(args.cache_dir, rebuild=args.rebuild, sdist=args.sdist)
    except (RecipeError, subprocess.CalledProcessError) as err:
        print(f"fairseq_wheel.py: {err}", file=sys.stderr)
        return 1
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
