"""A multi-class dataset of real text nobody on this project wrote: Debian's fortune cookies.

`python tools/real_text_dataset.py` downloads Debian's `fortunes` and `fortunes-min` data
packages with `apt-get download` (no root needed), unpacks them with `dpkg-deb -x` into a
cache folder, and turns the fortune files into:

* `train.jsonl`, `valid.jsonl`, `test.jsonl`: one `{"text": ..., "label": ...}` per line.
  The label is the fortune file (category) a text comes from, e.g. `computers` or
  `startrek`; the text keeps its original lines and indentation (sweeper normalises
  whitespace itself).
* `unlabeled.jsonl`: one `{"text": ...}` per line: every fortune of every category (the
  labeled categories' train texts and all other categories' texts), less any text that is
  in valid or test, so nothing the classifier is scored on is seen in pretraining.
* `SOURCE.md`: the packages, their versions and SHA-256, the licence, the command and the
  counts.

Rules, so that the same package versions give byte-identical files:

* A fortune file is a list of texts separated by lines holding only `%`; blank lines
  around a text are dropped, empty texts skipped.
* Two texts are the same text when their whitespace-collapsed forms are equal (what
  sweeper sees after normalising). Each such text is kept once; a text found in two
  labeled categories is ambiguous and kept out of the labeled splits (it may still be in
  the unlabeled corpus).
* Each class is split on its own (stratified): texts are ordered by SHA-256 of
  `seed` and the text, the first `--test-fraction` go to test, the next
  `--valid-fraction` to valid, the rest to train. Files are written in that hash order.

The download is cached: when the cache already holds the `.deb` files it is not fetched
again (`--refresh` fetches anew). Exit 2, with what to do, when `apt-get` or `dpkg-deb`
is missing or the download fails (offline, no package index).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "data" / "fortunes"
DEFAULT_CACHE = REPO_ROOT / "data" / "cache" / "debian"
PACKAGES = ("fortunes", "fortunes-min")
FORTUNE_DIR = Path("usr/share/games/fortunes")
# Topical categories that differ in vocabulary (and a little in form): four large, one small.
DEFAULT_CATEGORIES = ("computers", "politics", "science", "songs-poems", "startrek")
# Pictures, not natural language: left out of the unlabeled corpus too.
DEFAULT_SKIP = ("ascii-art",)
LICENCE = (
    "BSD licence of the Regents of the University of California (1991), with the "
    "advertising clause deleted (3-clause BSD), as stated in "
    "/usr/share/doc/fortunes/copyright; the fortunes are quotations collected from "
    "many authors (Ken Arnold's BSD fortune, Amy A. Lewis, Karl Lehenbauer's `cookie` "
    "postings, Debian maintainers)."
)


class UsageError(Exception):
    """A problem the user must fix (missing tool, offline, bad option): exit 2."""


@dataclass(frozen=True)
class Package:
    """One downloaded Debian package."""

    name: str
    version: str
    deb: Path
    sha256: str
    root: Path  # where it is unpacked


@dataclass
class Dataset:
    """The labeled splits, the unlabeled corpus and what was dropped on the way."""

    train: list[tuple[str, str]] = field(default_factory=list)
    valid: list[tuple[str, str]] = field(default_factory=list)
    test: list[tuple[str, str]] = field(default_factory=list)
    unlabeled: list[str] = field(default_factory=list)
    duplicates: int = 0  # texts seen again (same collapsed form), kept once
    ambiguous: int = 0  # texts in two labeled categories, kept out of the labeled splits
    capped: int = 0  # labeled texts over --max-per-class, left to the unlabeled corpus

    def splits(self) -> dict[str, list[tuple[str, str]]]:
        return {"train": self.train, "valid": self.valid, "test": self.test}


# ---------------------------------------------------------------------------- parsing


def parse_fortunes(content: str) -> list[str]:
    """The texts of one fortune file: records separated by lines that are exactly `%`."""
    texts: list[str] = []
    lines: list[str] = []
    for line in [*content.splitlines(), "%"]:
        if line.rstrip("\r") == "%":
            text = "\n".join(lines).strip("\n").rstrip()
            if text.strip():
                texts.append(text)
            lines = []
        else:
            lines.append(line.rstrip("\r"))
    return texts


def dedupe_key(text: str) -> str:
    """What counts as the same text: its whitespace-collapsed form."""
    return " ".join(text.split())


def order_key(seed: int, text: str) -> str:
    """A deterministic pseudo-random order, independent of Python's version and hash seed."""
    return hashlib.sha256(f"{seed}\0{dedupe_key(text)}".encode()).hexdigest()


def read_categories(directory: Path, skip: Iterable[str] = DEFAULT_SKIP) -> dict[str, list[str]]:
    """Every fortune file in `directory` (not `.dat` indexes, not `.u8` links), by name."""
    skipped = set(skip)
    out: dict[str, list[str]] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix in {".dat", ".u8"} or path.is_symlink() or not path.is_file():
            continue
        if path.name in skipped:
            continue
        try:
            content = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise UsageError(f"{path}: not UTF-8 ({err})") from err
        out[path.name] = parse_fortunes(content)
    return out


# ---------------------------------------------------------------------------- splitting


def build_dataset(
    categories: Mapping[str, Sequence[str]],
    labels: Sequence[str],
    *,
    seed: int = 0,
    valid_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_per_class: int = 0,
) -> Dataset:
    """Labeled splits of `labels`' texts and an unlabeled corpus of all texts.

    `categories` maps a category name to its texts. The result depends only on the
    texts, not on the order they are given in.
    """
    missing = [name for name in labels if name not in categories]
    if missing:
        known = ", ".join(sorted(categories))
        raise UsageError(f"unknown categories: {', '.join(missing)} (known: {known})")
    if len(set(labels)) < 2:
        raise UsageError("need at least two distinct label categories")
    if valid_fraction <= 0 or test_fraction <= 0 or valid_fraction + test_fraction >= 1:
        raise UsageError("--valid-fraction and --test-fraction must be > 0 and sum below 1")

    dataset = Dataset()
    # One text per collapsed form, the first in sorted order of (category, text).
    first: dict[str, str] = {}
    owners: dict[str, set[str]] = {}
    for name in sorted(categories):
        for text in sorted(categories[name]):
            key = dedupe_key(text)
            if key in first:
                dataset.duplicates += 1
            else:
                first[key] = text
            owners.setdefault(key, set()).add(name)

    label_set = set(labels)
    by_label: dict[str, list[str]] = {name: [] for name in sorted(label_set)}
    for key, names in owners.items():
        mine = names & label_set
        if len(mine) > 1:
            dataset.ambiguous += 1
        elif mine:
            by_label[next(iter(mine))].append(first[key])

    held_out: set[str] = set()
    for label, texts in by_label.items():
        texts.sort(key=lambda text: order_key(seed, text))
        if max_per_class > 0 and len(texts) > max_per_class:
            dataset.capped += len(texts) - max_per_class
            texts = texts[:max_per_class]
        if len(texts) < 3:
            raise UsageError(f"category {label} has {len(texts)} texts: need at least 3")
        n_test = max(1, round(len(texts) * test_fraction))
        n_valid = max(1, round(len(texts) * valid_fraction))
        dataset.test += [(text, label) for text in texts[:n_test]]
        dataset.valid += [(text, label) for text in texts[n_test : n_test + n_valid]]
        dataset.train += [(text, label) for text in texts[n_test + n_valid :]]
        held_out.update(dedupe_key(text) for text in texts[: n_test + n_valid])

    for split in (dataset.train, dataset.valid, dataset.test):
        split.sort(key=lambda item: order_key(seed, item[0]))
    dataset.unlabeled = sorted(
        (text for key, text in first.items() if key not in held_out),
        key=lambda text: order_key(seed, text),
    )
    return dataset


# ---------------------------------------------------------------------------- writing


def jsonl(records: Iterable[Mapping[str, str]]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def counts_table(dataset: Dataset) -> str:
    """Markdown table: one row per class, one column per split."""
    splits = dataset.splits()
    labels = sorted({label for items in splits.values() for _, label in items})
    counts = {name: Counter(label for _, label in items) for name, items in splits.items()}
    rows = ["| class | train | valid | test | total |", "|---|---:|---:|---:|---:|"]
    for label in [*labels, "total"]:
        cells = [
            sum(counts[name].values()) if label == "total" else counts[name][label]
            for name in splits
        ]
        rows.append(f"| {label} | " + " | ".join(str(c) for c in [*cells, sum(cells)]) + " |")
    return "\n".join(rows)


def source_md(
    dataset: Dataset,
    packages: Sequence[Package],
    labels: Sequence[str],
    command: str,
) -> str:
    pkg_rows = "\n".join(
        f"| `{p.name}` | `{p.version}` | `{p.deb.name}` | `{p.sha256}` |" for p in packages
    )
    return f"""# Source of this dataset

Made by `tools/real_text_dataset.py` (sweeper) from Debian's fortune-cookie data packages:

| package | version | file | sha256 |
|---|---|---|---|
{pkg_rows}

Text: the fortune files in `/usr/share/games/fortunes/` of those packages; the label is
the fortune file a text comes from. Labeled categories: {", ".join(sorted(labels))}.

Licence: {LICENCE}

Command: `{command}`

## Counts

{counts_table(dataset)}

Unlabeled corpus (`unlabeled.jsonl`): {len(dataset.unlabeled)} texts (all categories, less
valid and test). Exact duplicates (whitespace-collapsed) dropped: {dataset.duplicates};
texts in two labeled categories left out of the labeled splits: {dataset.ambiguous};
labeled texts over `--max-per-class`: {dataset.capped}.
"""


def write_dataset(out: Path, dataset: Dataset, source: str) -> dict[str, int]:
    """Write the four JSONL files and SOURCE.md; returns each file's size in bytes."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        f"{name}.jsonl": jsonl({"text": text, "label": label} for text, label in items)
        for name, items in dataset.splits().items()
    }
    files["unlabeled.jsonl"] = jsonl({"text": text} for text in dataset.unlabeled)
    files["SOURCE.md"] = source
    sizes: dict[str, int] = {}
    for name, content in files.items():
        data = content.encode("utf-8")
        (out / name).write_bytes(data)
        sizes[name] = len(data)
    return sizes


# ---------------------------------------------------------------------------- fetching


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UsageError(
            f"`{name}` not found: this script needs a Debian or Ubuntu machine "
            f"(apt and dpkg), or copy {' and '.join(p + '_*.deb' for p in PACKAGES)} "
            f"into the cache folder (--cache) and install dpkg"
        )
    return path


def _cached_deb(cache: Path, package: str) -> Path | None:
    found = sorted(cache.glob(f"{package}_*.deb"))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise UsageError(f"{cache}: several cached versions of {package} ({names}): keep one")
    return found[0] if found else None


def fetch(cache: Path, refresh: bool = False) -> list[Package]:
    """Download (unless cached) and unpack the fortune packages; returns them, sorted."""
    cache.mkdir(parents=True, exist_ok=True)
    dpkg_deb = _tool("dpkg-deb")
    packages: list[Package] = []
    for package in PACKAGES:
        deb = _cached_deb(cache, package)
        if deb is not None and refresh:
            deb.unlink()
            deb = None
        if deb is None:
            apt_get = _tool("apt-get")
            print(f"downloading {package} with apt-get download into {cache}", flush=True)
            result = subprocess.run(
                [apt_get, "download", package],
                cwd=cache,
                capture_output=True,
                text=True,
                check=False,
            )
            deb = _cached_deb(cache, package)
            if result.returncode != 0 or deb is None:
                detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
                raise UsageError(
                    f"`apt-get download {package}` failed (exit {result.returncode}): "
                    + " / ".join(detail)
                    + "\n  offline or no package index? Run `sudo apt-get update` with network"
                    f" access, or copy {package}_*.deb from a Debian mirror into {cache}"
                )
        else:
            print(f"cached: {deb}", flush=True)
        version = subprocess.run(
            [dpkg_deb, "--field", str(deb), "Version"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        root = cache / deb.stem
        if not (root / FORTUNE_DIR).is_dir():
            partial = cache / (deb.stem + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            subprocess.run([dpkg_deb, "-x", str(deb), str(partial)], check=True)
            shutil.rmtree(root, ignore_errors=True)
            partial.rename(root)
            print(f"unpacked {deb.name} into {root}", flush=True)
        digest = hashlib.sha256(deb.read_bytes()).hexdigest()
        packages.append(Package(package, version, deb, digest, root))
    return packages


# ---------------------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Build a multi-class JSONL dataset (train/valid/test) and an unlabeled corpus "
            "from Debian's fortune-cookie packages (fortunes, fortunes-min; BSD licence): "
            "the fortune file's category is the label."
        ),
        epilog=(
            "Needs apt-get and dpkg-deb (no root) and access to a Debian mirror, unless the "
            "cache already holds the .deb files. Exit 2 with what to do when not."
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output folder (default: data/fortunes in the repository)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=DEFAULT_CACHE,
        help="where the .deb files are downloaded and unpacked (default: data/cache/debian in the "
        "repository)",
    )
    parser.add_argument(
        "--categories",
        default=",".join(DEFAULT_CATEGORIES),
        help="comma-separated fortune files to label, at least 2 (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0, help="split seed (default: %(default)s)")
    parser.add_argument(
        "--valid-fraction",
        type=float,
        default=0.1,
        help="share of each class for valid (default: %(default)s)",
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.1,
        help="share of each class for test (default: %(default)s)",
    )
    parser.add_argument(
        "--max-per-class",
        type=int,
        default=0,
        help="keep at most this many labeled texts per class, 0 for all (default: %(default)s)",
    )
    parser.add_argument(
        "--refresh", action="store_true", help="download the packages again even if cached"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    labels = [name.strip() for name in args.categories.split(",") if name.strip()]
    try:
        packages = fetch(args.cache, refresh=args.refresh)
        categories: dict[str, list[str]] = {}
        for package in packages:
            categories.update(read_categories(package.root / FORTUNE_DIR))
        print(
            f"read {sum(len(t) for t in categories.values())} fortunes "
            f"in {len(categories)} categories",
            flush=True,
        )
        dataset = build_dataset(
            categories,
            labels,
            seed=args.seed,
            valid_fraction=args.valid_fraction,
            test_fraction=args.test_fraction,
            max_per_class=args.max_per_class,
        )
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    command = "python tools/real_text_dataset.py " + " ".join(
        [
            f"--categories {','.join(labels)}",
            f"--seed {args.seed}",
            f"--valid-fraction {args.valid_fraction}",
            f"--test-fraction {args.test_fraction}",
            f"--max-per-class {args.max_per_class}",
        ]
    )
    sizes = write_dataset(args.out, dataset, source_md(dataset, packages, labels, command))
    for package in packages:
        print(f"package {package.name} {package.version}")
    print(counts_table(dataset))
    print(
        f"unlabeled: {len(dataset.unlabeled)} texts; duplicates dropped: {dataset.duplicates}; "
        f"ambiguous (two labeled categories): {dataset.ambiguous}; capped: {dataset.capped}"
    )
    for name, size in sizes.items():
        print(f"wrote {args.out / name} ({size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
