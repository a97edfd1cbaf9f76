"""Build stand-ins for files sweeper cannot download, to run shipped specs end to end.

  lab-size DIR   the lab's files for sweeps/roberta.yaml, at the lab's size:
                   DIR/data/cls-books/{train,valid,test}.{review,label}
                   DIR/models/roberta-small-fr/sentencepiece.bpe.model
                   DIR/models/roberta-small-fr/dict.txt    (32,000-row model vocabulary)
                   DIR/models/roberta-small-fr/model.pt    (fairseq RoBERTa, 4 x 512)

The reviews are the demo corpus (generated; 1,800 / 200 / 200 by default, the lab's
split sizes). The sentencepiece model is trained on it; the corpus yields about a
thousand pieces, so dict.txt lists them and then `madeupwordNNNN` fillers (fairseq's
own name for padding entries) up to the lab's 32,000 embedding rows. model.pt is made
by fairseq's masked_lm at the lab's arch for --pretrain-steps updates (20 by default):
a real fairseq checkpoint, but nearly untrained; it tests the path, not the science.
Steps already done are cached under DIR/.work, so running it again is quick.

Run the lab's spec on it: build it at the repository root (roberta.yaml's paths are
relative to sweeps/) and drop the GPU request on a CPU machine:
  sweeper fixture lab-size .
  sweeper run sweeps/roberta.yaml resources.gpu=0
or anywhere, with the overrides this command prints:
  sweeper fixture lab-size /tmp/lab --train-size 96 --pretrain-steps 2
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from sweeper.cli.common import fail

LAB_ARCH = {"layers": 4, "embed_dim": 512, "ffn_dim": 512, "heads": 8, "max_positions": 256}
LAB_VOCAB = 32000
"""The lab model's embedding rows: 4 specials + dict.txt entries + `<mask>`."""
DATA = Path("data/cls-books")
MODEL = Path("models/roberta-small-fr")


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=["lab-size"], help="what to build")
    parser.add_argument("dir", type=Path, metavar="DIR", help="where (created if needed)")
    parser.add_argument(
        "--train-size", type=int, default=1800, help="labelled training reviews (default 1800)"
    )
    parser.add_argument(
        "--pretrain-steps", type=int, default=20, help="masked-LM updates for model.pt (20)"
    )
    parser.add_argument("--seed", type=int, default=0, help="corpus and pretraining seed (0)")


def run(args: argparse.Namespace) -> int:
    if args.train_size < 8 or args.pretrain_steps < 1:
        fail("--train-size must be at least 8 and --pretrain-steps at least 1")
    root = args.dir.resolve()
    work = root / ".work"
    print(f"[1/4] demo corpus, sentencepiece model and dict under {work / 'corpus'}", flush=True)
    corpus = _generate(work, args.train_size, args.seed)
    print(f"[2/4] reviews to {root / DATA}; dict.txt padded to {LAB_VOCAB:,} rows", flush=True)
    (root / DATA).mkdir(parents=True, exist_ok=True)
    (root / MODEL).mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        for suffix in ("review", "label"):
            shutil.copyfile(corpus / f"{split}.{suffix}", root / DATA / f"{split}.{suffix}")
    shutil.copyfile(corpus / "sentencepiece.bpe.model", root / MODEL / "sentencepiece.bpe.model")
    entries = pad_dictionary(corpus / "dict.txt", root / MODEL / "dict.txt", LAB_VOCAB)
    print(f"      {entries:,} dict entries (pieces, then madeupword fillers)", flush=True)
    print(f"[3/4] fairseq masked_lm at the lab's arch, {args.pretrain_steps} steps", flush=True)
    checkpoint = _pretrain(work, root, corpus, args.pretrain_steps, args.seed)
    shutil.copyfile(checkpoint, root / MODEL / "model.pt")
    print(f"[4/4] done: {root / MODEL / 'model.pt'}\n\nrun the lab's spec on it:", flush=True)
    print("  sweeper run sweeps/roberta.yaml resources.gpu=0 " + " ".join(overrides(root)))
    return 0


def overrides(root: Path) -> list[str]:
    """roberta.yaml's file fields pointed at a fixture built in `root`."""
    return [
        f"data.dir={root / DATA}",
        f"model.sentencepiece={root / MODEL / 'sentencepiece.bpe.model'}",
        f"model.dictionary={root / MODEL / 'dict.txt'}",
        f"model.checkpoint={root / MODEL / 'model.pt'}",
    ]


def pad_dictionary(source: Path, target: Path, vocab_size: int) -> int:
    """Write `source`'s entries then `madeupwordNNNN 0` fillers, so that fairseq's model
    sees `vocab_size` rows; returns the number of entries written."""
    from sweeper.data.vocab import FAIRSEQ_SPECIALS, MASK_SYMBOLS

    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    wanted = vocab_size - len(FAIRSEQ_SPECIALS) - MASK_SYMBOLS
    if len(lines) > wanted:
        fail(f"{source} has {len(lines)} entries, more than a {vocab_size}-row vocabulary holds")
    fillers = [f"madeupword{i:04d} 0" for i in range(wanted - len(lines))]
    target.write_text("\n".join([*lines, *fillers]) + "\n", encoding="utf-8")
    return wanted


def _generate(work: Path, train_size: int, seed: int) -> Path:
    """The demo corpus (cached by its settings) in work/corpus."""
    from sweeper.data.generate import ensure_generated

    corpus = work / "corpus"
    spec = _spec(work, {
        "source": "generated",
        "dir": str(corpus),
        "generate": {"seed": seed, "train_size": train_size, "valid_size": 200,
                     "test_size": 200, "unlabeled_size": 4000, "label_noise": 0.2,
                     "vocab_size": 1000},
    }, corpus / "sentencepiece.bpe.model", corpus / "dict.txt", pretrain=None)  # fmt: skip
    ensure_generated(spec, log=lambda line: print(f"      {line}", flush=True))
    return corpus


def _pretrain(work: Path, root: Path, corpus: Path, steps: int, seed: int) -> Path:
    """fairseq masked_lm on the corpus's unlabeled reviews, through the padded dict."""
    from sweeper.trainers.trial_pipeline import prepare_inputs

    pretrain_block = {"steps": steps, "batch_size": 8, "lr": 0.0005, "seed": seed}
    spec = _spec(work, {"source": "files", "dir": str(corpus)},
                 root / MODEL / "sentencepiece.bpe.model", root / MODEL / "dict.txt",
                 pretrain=pretrain_block)  # fmt: skip
    inputs = prepare_inputs(spec, log=lambda line: print(f"      {line}", flush=True))
    return inputs.pretrained["masked_lm"]  # the default objective of model.pretrain


def _spec(work: Path, data: dict, sentencepiece: Path, dictionary: Path, pretrain: dict | None):
    """A one-trial spec that only prepares data and pretrains (never run as a sweep)."""
    from sweeper.spec.load import validate_mapping

    model: dict = {
        "arch": {**LAB_ARCH, "vocab_size": LAB_VOCAB} if pretrain else dict(LAB_ARCH),
        "sentencepiece": str(sentencepiece),
        "dictionary": str(dictionary),
    }
    if pretrain is not None:
        model["pretrain"] = pretrain
    raw = {
        "name": "lab-fixture",
        "output_dir": str(work),
        "data": data,
        "model": model,
        "train": {"epochs": 1, "batch_size": 8, "lr": 1e-5},
        "grid": {"seed": [1], "init": ["pretrained" if pretrain else "random"]},
    }
    return validate_mapping(raw, "lab-fixture.yaml", base_dir=work)
