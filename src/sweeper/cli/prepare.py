"""Encode and binarize a sweep's data once, for every trial of both frameworks.

Reads the labeled splits named by the spec's `data:` block (`format: lines`:
`{split}.review` / `{split}.label` under data.dir; or JSON Lines, CSV, TSV, Parquet, a
`datasets` folder), encodes them with model.sentencepiece and model.dictionary, or with
the tokenizer `model.tokenizer.train` trains from the data (cached in
OUTPUT_DIR/tokenizer/<hash>; "tokenizer: cache hit <hash>" when reused), as fairseq ids
(<s>=0 <pad>=1 </s>=2 <unk>=3, then dict.txt), and writes
  OUTPUT_DIR/prepared/<hash>/fairseq/{input0,label}/   fairseq sentence_prediction data
  OUTPUT_DIR/prepared/<hash>/fairseq/pretrain/         masked_lm data (with model.pretrain)
  OUTPUT_DIR/prepared/<hash>/hf/{split}.jsonl          the same ids for HF trainers
  OUTPUT_DIR/prepared/<hash>/stats.json                the statistics printed at the end
With `data.source: generated` the demo corpus, its sentencepiece model and dict.txt are
generated into data.dir first. Both steps are cached: the hash covers every input byte,
so running again with unchanged inputs prints "cached: <path>" and does nothing.
The printed table shows the classes in index order (`classes: 0=... 1=...`; with
`data.labels: auto` the sorted train labels). Trials only read the prepared folder;
run this alone to inspect the data before a sweep. A `task: causal_lm` spec prepares
its prompt/answer ids instead (cached by content; `--force` does not apply): each
task prepares what its backends read (`sweeper.backends.Task.prepare`).

Bad data (misaligned text/label lines, a missing column, an empty text, an unknown
label or, with `labels: auto`, a valid/test label train lacks, bytes that are not UTF-8,
a missing or empty file, a malformed dict.txt) is reported as `error: FILE:LINE: ...`
(or `FILE:row N: ...` for CSV, Parquet and `datasets` rows) with exit code 2, and
nothing is created.

  sweeper prepare sweeps/demo.yaml
  sweeper prepare sweeps/demo.yaml data.generate.label_noise=0.2
  sweeper prepare sweeps/roberta.yaml --force
"""

from __future__ import annotations

import argparse
import sys

from sweeper.cli.common import EXIT_BAD_INPUT, add_spec_argument, load_or_exit


def build_parser(parser: argparse.ArgumentParser) -> None:
    add_spec_argument(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="rebuild even when cached (and regenerate the demo corpus)",
    )


def run(args: argparse.Namespace) -> int:
    spec = load_or_exit(args.spec, args.overrides)
    from sweeper import backends
    from sweeper.data import DataError

    prepare = backends.load(backends.task(spec.task).prepare)
    try:
        prepare(spec, print, need_pretrained=False, force=args.force)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
