"""Bad input fails early and clearly (docs/architecture.md, invariant 5), through the
real `sweeper run`.

Every case starts from a complete, valid set of inputs (raw splits, sentencepiece
model, dict.txt, a pretrained checkpoint of the spec's arch; `test_the_valid_inputs_
pass_preflight` holds that), breaks exactly one thing, and runs the real CLI in a
subprocess. It must exit 2 with a message naming the file or field and what was
expected, before any trial starts: no output_dir (so no SQLite store, no prepared
data, no Ray folder) and no `mlruns/` in the working directory. Ray is never reached;
that is the point. Each case is written to the reliability record.

The spec schema's own 26 malformed-field cases are unit tests of `sweeper validate`
(tests/unit/test_spec.py); the spec cases here are the file-level ones `run` must
also stop on (missing, not YAML, not a mapping, unsafe tags, unset variables).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.processes import sweeper_command
from tests.support.reliability import record
from tests.support.sweeps import sweeper_env

pytestmark = pytest.mark.integration

ARCH = {"layers": 1, "embed_dim": 16, "ffn_dim": 32, "heads": 2, "max_positions": 32}
GENERATE = {
    "seed": 0,
    "train_size": 20,
    "valid_size": 10,
    "test_size": 10,
    "unlabeled_size": 200,
    "vocab_size": 100,
}


@dataclass
class Case:
    """One broken input: a copy of the valid inputs under `root`, and its spec."""

    root: Path
    spec: dict[str, Any]
    spec_file: Path
    extra: list[str] = field(default_factory=list)
    """Overrides appended to the command line."""

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def set(self, dotted: str, value: Any) -> None:
        *parents, last = dotted.split(".")
        node = self.spec
        for part in parents:
            node = node[part]
        node[last] = value


@pytest.fixture(scope="module")
def valid_inputs(tmp_path_factory) -> Path:
    """Generated splits, sentencepiece model and dict, plus fairseq checkpoints: one of
    the spec's arch (`model.pt`) and one of a wider arch (`wide.pt`)."""
    import torch

    from sweeper.data.generate import ensure_generated
    from sweeper.models.init import initial_state
    from sweeper.spec.load import validate_mapping
    from sweeper.spec.model_block import ArchConfig

    root = tmp_path_factory.mktemp("bad_input_inputs")
    raw = {
        "name": "gen",
        "output_dir": str(root / "unused"),
        "data": {"source": "generated", "dir": str(root / "data"), "generate": GENERATE},
        "model": {
            "arch": ARCH,
            "sentencepiece": str(root / "data" / "sp.model"),
            "dictionary": str(root / "data" / "dict.txt"),
            "pretrain": {"steps": 1},
        },
    }
    spec = validate_mapping(raw, "gen.yaml", base_dir=root)
    ensure_generated(spec, log=lambda _: None)
    (root / "data" / ".sweeper-generated.json").unlink()
    entries = len((root / "data" / "dict.txt").read_text(encoding="utf-8").splitlines())
    vocab = 4 + entries + 1
    for name, arch in (("model.pt", ARCH), ("wide.pt", {**ARCH, "embed_dim": 32})):
        state = initial_state(ArchConfig(**arch), vocab, 2, "random", 0, None)
        torch.save({"model": state}, root / "data" / name)
    return root / "data"


def new_case(tmp_path: Path, inputs: Path) -> Case:
    shutil.copytree(inputs, tmp_path / "data")
    spec = {
        "name": "badinput",
        "output_dir": "out",
        "data": {"source": "files", "dir": "data"},
        "model": {
            "arch": ARCH,
            "sentencepiece": "data/sp.model",
            "dictionary": "data/dict.txt",
            "checkpoint": "data/model.pt",
        },
        "train": {"epochs": 1, "batch_size": 4},
        "grid": {"seed": [1], "init": ["pretrained", "random"], "framework": ["dummy"]},
        "retries": 0,
    }
    return Case(tmp_path, spec, tmp_path / "spec.yaml")


def _write(path: Path, data: bytes | str) -> None:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def _edit_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


def _spec_text(c: Case, text: str) -> None:
    c.spec_file = c.root / "raw.yaml"
    _write(c.spec_file, text)


def _as_jsonl(c: Case, split: str, number: int, row: dict[str, Any]) -> None:
    """The case's splits as JSON Lines (`labels: auto`), row `number` of `split` replaced."""
    import json

    for name in ("train", "valid", "test"):
        texts = (c.data / f"{name}.review").read_text(encoding="utf-8").splitlines()
        labels = (c.data / f"{name}.label").read_text(encoding="utf-8").splitlines()
        rows = [{"text": t, "label": lab} for t, lab in zip(texts, labels, strict=True)]
        if name == split:
            rows[number - 1] = row
        lines = "".join(json.dumps(r) + "\n" for r in rows)
        (c.data / f"{name}.jsonl").write_text(lines, encoding="utf-8")
    c.set("data.format", "jsonl")
    c.set("data.files", {name: f"{name}.jsonl" for name in ("train", "valid", "test")})
    c.set("data.labels", "auto")


def _torch_save(obj: Any, path: Path) -> None:
    import torch

    torch.save(obj, path)


Mutate = Callable[[Case], None]
CASES: list[tuple[str, str, Mutate, list[str]]] = [
    # --- the spec file itself
    ("spec missing", "SPEC names no file",
     lambda c: setattr(c, "spec_file", c.root / "nope.yaml"), ["nope.yaml", "file not found"]),
    ("spec not YAML", "unclosed bracket in the sweep file",
     lambda c: _spec_text(c, "name: [x\n"), ["raw.yaml", "not valid YAML"]),
    ("spec not a mapping", "the sweep file is a YAML list",
     lambda c: _spec_text(c, "- a\n- b\n"), ["raw.yaml", "expected a mapping"]),
    ("spec python tag", "`!!python/object/apply:os.system` in the sweep file",
     lambda c: _spec_text(c, "name: !!python/object/apply:os.system ['touch pwned']\n"),
     ["raw.yaml", "not valid YAML"]),
    ("spec unset env var", "tracking.uri: ${SWEEPER_TEST_UNSET_VAR} with the variable unset",
     lambda c: c.set("tracking", {"uri": "${SWEEPER_TEST_UNSET_VAR}"}),
     ["tracking.uri", "SWEEPER_TEST_UNSET_VAR is not set"]),
    # --- data files
    ("data dir missing", "data.dir names a missing folder",
     lambda c: c.set("data.dir", "no-such-dir"), ["train.review", "not found"]),
    ("label file missing", "valid.label deleted",
     lambda c: (c.data / "valid.label").unlink(), ["valid.label", "not found"]),
    ("split missing from spec", "data.splits lists no valid split",
     lambda c: c.set("data.splits", {"train": "train", "test": "test"}),
     ["data.splits", "expected train, valid and test"]),
    ("unknown label", "line 3 of train.label is `maybe`",
     lambda c: _edit_line(c.data / "train.label", 3, "maybe"),
     ["train.label:3", "unknown label 'maybe'", "expected one of"]),
    ("table label unseen in train", "labels: auto; test.jsonl line 2 has a label train lacks",
     lambda c: _as_jsonl(c, "test", 2, {"text": "un livre", "label": "maybe"}),
     ["test.jsonl:2", "unknown label 'maybe'", "not a train label"]),
    ("table column missing", "line 4 of valid.jsonl has `review` instead of `text`",
     lambda c: _as_jsonl(c, "valid", 4, {"review": "un livre", "label": "1"}),
     ["valid.jsonl:4", "empty text in column 'text'"]),
    ("misaligned lines", "test.review has one line more than test.label",
     lambda c: _write(c.data / "test.review", (c.data / "test.review").read_text() + "extra\n"),
     ["test.review", "11 lines", "has 10"]),
    ("text not UTF-8", "byte 0xff in line 2 of train.review",
     lambda c: _write(c.data / "train.review", b"good review\n\xffbad\n"),
     ["train.review:2", "not valid UTF-8"]),
    ("empty text file", "valid.review is empty",
     lambda c: _write(c.data / "valid.review", ""), ["valid.review", "is empty"]),
    # --- sentencepiece model
    ("sentencepiece missing", "model.sentencepiece names a missing file",
     lambda c: (c.data / "sp.model").unlink(), ["sp.model", "sentencepiece model not found"]),
    ("sentencepiece corrupt", "sp.model overwritten with text",
     lambda c: _write(c.data / "sp.model", "not a model\n"),
     ["sp.model", "not a sentencepiece model"]),
    # --- dict.txt
    ("dict missing", "model.dictionary names a missing file",
     lambda c: (c.data / "dict.txt").unlink(), ["dict.txt", "dictionary not found"]),
    ("dict line without count", "line 2 of dict.txt is `hello`",
     lambda c: _edit_line(c.data / "dict.txt", 2, "hello"),
     ["dict.txt:2", "expected '<symbol> <count>'"]),
    ("dict duplicate symbol", "dict.txt line 2 repeats line 1",
     lambda c: _edit_line(
         c.data / "dict.txt", 2, (c.data / "dict.txt").read_text().split("\n")[0]),
     ["dict.txt:2", "duplicate symbol"]),
    ("dict lists a special", "dict.txt line 1 is `<unk> 5`",
     lambda c: _edit_line(c.data / "dict.txt", 1, "<unk> 5"), ["dict.txt:1", "built-in specials"]),
    ("dict vs arch vocab", "model.arch.vocab_size 9999 against the dict's size",
     lambda c: c.set("model.arch", {**ARCH, "vocab_size": 9999}),
     ["dict.txt", "model.arch.vocab_size is 9999"]),
    # --- pretrained checkpoint
    ("checkpoint missing", "model.checkpoint names a missing file",
     lambda c: (c.data / "model.pt").unlink(), ["model.pt", "checkpoint not found"]),
    ("checkpoint not torch", "model.pt overwritten with text",
     lambda c: _write(c.data / "model.pt", "hello\n"), ["model.pt", "not a PyTorch checkpoint"]),
    ("checkpoint without model", "model.pt is a torch file without a `model` state dict",
     lambda c: _torch_save({"weights": 1}, c.data / "model.pt"),
     ["model.pt", "no `model` state dict"]),
    ("checkpoint of another arch", "model.pt from an arch with embed_dim 32 (spec: 16)",
     lambda c: shutil.copy(c.data / "wide.pt", c.data / "model.pt"),
     ["model.pt", "in the checkpoint", "expected the encoder of model.arch"]),
    # --- command-line overrides
    ("override without =", "override `train.epochs`",
     lambda c: c.extra.append("train.epochs"), ["train.epochs", "field.path=value"]),
    ("override bad value", "override `train.epochs=zero`",
     lambda c: c.extra.append("train.epochs=zero"), ["train.epochs", "integer"]),
    ("override into a scalar", "override `train.epochs.x=1` (epochs is 1)",
     lambda c: c.extra.append("train.epochs.x=1"), ["train.epochs", "is not a mapping"]),
    ("override unknown field", "override `train.lrr=1`",
     lambda c: c.extra.append("train.lrr=1"), ["train.lrr", "did you mean 'lr'"]),
    # --- resources no node has (Ray would queue the trials for ever)
    ("more CPUs than any node", "override `resources.cpu=4096`",
     lambda c: c.extra.append("resources.cpu=4096"),
     ["4096 CPUs", "no node has that", "this machine"]),
    ("more GPUs than any node", "override `resources.gpu=64`",
     lambda c: c.extra.append("resources.gpu=64"), ["64 GPUs", "no node has that"]),
]  # fmt: skip


def test_a_gpu_fraction_without_a_gpu_exits_2_fast(tmp_path, valid_inputs):
    """What sweeps/roberta.yaml asks for (a GPU fraction per trial) on a GPU-less machine."""
    from sweeper.trainers.devices import gpu_count

    if gpu_count():
        pytest.skip("this machine has a GPU: resources.gpu=0.5 fits")
    case = new_case(tmp_path, valid_inputs)
    case.spec_file.write_text(yaml.safe_dump(case.spec), encoding="utf-8")
    start = time.monotonic()
    done = subprocess.run(
        sweeper_command("run", case.spec_file, "resources.gpu=0.5"),
        capture_output=True, text=True, env=sweeper_env(), cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert done.returncode == 2, done.stdout + done.stderr
    assert "asks for 1 CPUs and 0.5 GPUs" in done.stderr
    assert "this machine:" in done.stderr and ", 0 GPUs" in done.stderr
    assert not case.out.exists()  # no store, no prepared data, no run
    record(
        "bad input: a GPU fraction on a machine without a GPU",
        "`sweeper run SPEC resources.gpu=0.5` with no GPU",
        f"exit {done.returncode} in {elapsed:.1f} s, naming 0.5 GPUs asked and 0 found; "
        "output dir not created",
    )


def test_the_valid_inputs_pass_preflight(tmp_path, valid_inputs):
    """The baseline every case breaks is itself accepted (else the cases prove nothing)."""
    from sweeper.engine.preflight import check_inputs
    from sweeper.spec.load import validate_mapping

    case = new_case(tmp_path, valid_inputs)
    check_inputs(validate_mapping(case.spec, "spec.yaml", base_dir=tmp_path))
    assert not case.out.exists()


@pytest.mark.parametrize(
    ("what", "injected", "mutate", "words"), CASES, ids=[c[0].replace(" ", "-") for c in CASES]
)
def test_bad_input_exits_2_before_anything_is_created(
    tmp_path, valid_inputs, what, injected, mutate, words
):
    case = new_case(tmp_path, valid_inputs)
    mutate(case)
    if not case.spec_file.exists() and case.spec_file.name == "spec.yaml":
        case.spec_file.write_text(yaml.safe_dump(case.spec), encoding="utf-8")
    start = time.monotonic()
    done = subprocess.run(
        sweeper_command("run", case.spec_file, *case.extra),
        capture_output=True,
        text=True,
        env=sweeper_env(),
        cwd=tmp_path,
        timeout=180,
        check=False,
    )
    elapsed = time.monotonic() - start
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    created = [p.name for p in (case.out, tmp_path / "mlruns", tmp_path / "pwned") if p.exists()]
    message = errors[0].removeprefix("error: ").replace(f"{tmp_path}/", "") if errors else "-"
    if len(message) > 200:
        message = message[:200] + " …"
    stores = [p for p in (case.out / "mlflow.db", tmp_path / "mlruns") if p.exists()]
    observed = (
        f"exit {done.returncode} in {elapsed:.1f} s; message: {message}; "
        f"runs created: {'0 (no tracking store)' if not stores else 'store exists: see test'}; "
        f"output dir created: {'yes' if case.out.exists() else 'no'}"
    )
    ok = done.returncode == 2 and bool(errors) and not created
    ok = ok and all(word in done.stderr for word in words)
    record(f"bad input: {what}", injected, observed, passed=ok)
    assert done.returncode == 2, done.stdout + done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert errors, done.stderr
    assert not created, f"created {created} despite bad input"
    assert "Traceback" not in done.stderr
