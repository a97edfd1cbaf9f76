"""A fairseq trial killed mid-training resumes from its last checkpoint.

The kill is the realistic one: the process supervising the trial (a Ray worker, here a
driver subprocess running `run_trainer`) is SIGKILLed once the first epoch's
checkpoint_last.pt exists. fairseq itself must die with it (no orphan keeps training
into the folder the retry uses), and the retry must continue from the checkpoint
(fairseq's "Loaded checkpoint ... (epoch N @ M updates)", train events after M only)
and finish with the full number of updates.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper import record_names
from sweeper.spec.load import load_spec
from sweeper.spec.schema import SweepSpec
from sweeper.trainers.base import TrialJob
from sweeper.trainers.events import MetricEvent
from sweeper.trainers.fairseq.fairseq_checkpoints import BEST, LAST
from sweeper.trainers.fairseq.fairseq_trainer import FairseqTrainer
from sweeper.trainers.runner import run_trainer

pytestmark = pytest.mark.integration
pytest.importorskip("fairseq")

EPOCHS, LOG_INTERVAL = 6, 5
DRIVER = (
    "import sys; from pathlib import Path; "
    "from sweeper.trainers.base import TrialJob; "
    "from sweeper.trainers.fairseq.fairseq_trainer import FairseqTrainer; "
    "from sweeper.trainers.runner import run_trainer; "
    "run_trainer(FairseqTrainer(), TrialJob.load(Path(sys.argv[1])))"
)
LOADED = re.compile(r"Loaded checkpoint (\S+) \(epoch (\d+) @ (\d+) updates\)")
DEMO = Path(__file__).resolve().parents[2] / "sweeps" / "demo.yaml"


def tiny_spec(root: Path) -> SweepSpec:
    """The demo spec at toy size (200 training sentences, 25 updates per epoch)."""
    corpus = root / "corpus"
    return load_spec(
        DEMO,
        [
            f"output_dir={root / 'out'}",
            f"data.dir={corpus}",
            f"model.sentencepiece={corpus / 'sentencepiece.bpe.model'}",
            f"model.dictionary={corpus / 'dict.txt'}",
            "data.generate.train_size=200",
            "data.generate.valid_size=40",
            "data.generate.test_size=40",
            "data.generate.unlabeled_size=400",
            "data.generate.vocab_size=200",
            "model.arch.layers=1",
            "model.arch.embed_dim=16",
            "model.arch.ffn_dim=32",
            "model.arch.heads=2",
            "model.arch.max_positions=64",
            f"train.epochs={EPOCHS}",
            "train.batch_size=8",
            "train.lr=0.002",
        ],
    )


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> TrialJob:
    from sweeper.data import prepare
    from sweeper.models import init_checkpoint

    root = tmp_path_factory.mktemp("fairseq_resume")
    spec = tiny_spec(root)
    prepared = prepare(spec, log=lambda _: None)
    arch = spec.model.arch.model_copy(update={"vocab_size": prepared.vocab_size})
    init = init_checkpoint(arch, prepared.vocab_size, 2, "random", 2, None, root / "init")
    return TrialJob(
        framework="fairseq",
        seed=2,
        init="random",
        method="full",
        train=spec.train.model_dump(mode="json"),
        lora=None,
        arch=arch.model_dump(mode="json"),
        num_classes=prepared.num_classes,
        num_train=prepared.num_train,
        data=str(prepared.fairseq_dir),
        init_checkpoint=str(init),
        out_dir=str(root / "trial"),
        extra={"log_interval": LOG_INTERVAL},
    )


def processes_using(path: Path) -> list[int]:
    """Live processes whose command line mentions `path` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(path) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def kill_driver_after_first_checkpoint(job: TrialJob, job_file: Path) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(job_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while not (job.checkpoint_dir / LAST).exists():
        assert driver.poll() is None, "the trial ended before writing checkpoint_last.pt"
        assert time.monotonic() < deadline, "no checkpoint_last.pt after 180 s"
        time.sleep(0.02)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()


def wait_until_gone(path: Path, timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := processes_using(path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_killed_trial_resumes_from_its_last_checkpoint(job: TrialJob, tmp_path: Path) -> None:
    out = Path(job.out_dir)
    out.mkdir(parents=True)
    job.save(tmp_path / "job.json")
    kill_driver_after_first_checkpoint(job, tmp_path / "job.json")
    assert wait_until_gone(job.checkpoint_dir) == [], "fairseq outlived its parent"

    events_before = len((out / record_names.EVENTS_FILE).read_text().splitlines())
    result = run_trainer(FairseqTrainer(), job)

    second_log = (out / record_names.TRAINER_LOG_FILE).read_text().split("\n$ ")[-1]
    loaded = LOADED.search(second_log)
    assert loaded is not None, "the second run loaded no checkpoint"
    path, epoch, updates = Path(loaded[1]), int(loaded[2]), int(loaded[3])
    per_epoch = job.updates_per_epoch
    assert path.name == LAST and "loading pretrained model" not in second_log
    assert 0 < updates < job.total_updates and updates % per_epoch == 0
    assert epoch == updates // per_epoch + 1  # fairseq names the epoch it resumes into

    lines = (out / record_names.EVENTS_FILE).read_text().splitlines()[events_before:]
    resumed = [MetricEvent.from_dict(json.loads(line)) for line in lines]
    train_steps = [e.step for e in resumed if e.split == "train"]
    assert train_steps[0] == updates + LOG_INTERVAL  # continued, did not start over
    assert min(e.step for e in resumed) > updates

    valid_steps = sorted(e.step for e in result.events if e.split == "valid")
    assert valid_steps == [per_epoch * k for k in range(1, EPOCHS + 1)]
    assert max(e.step for e in result.events) == job.total_updates
    assert f"@ {job.total_updates} updates" in second_log
    assert sorted(p.name for p in job.checkpoint_dir.iterdir()) == [BEST, LAST]
