"""Exact parameter counts of the fairseq and HF RoBERTa a sweep fine-tunes.

Builds the real model of each framework from the spec's `model.arch` (random weights,
nothing is downloaded or trained) and counts its parameters by component. Then it shows
the conventions people use when they count by hand, each derived from those counts, so
you can tell which figure a report meant:

  weights only (reports 000, 001)   token + position embeddings + weight matrices;
                                    no biases, no layer norms
  all parameters (report 002)       every parameter of fairseq's encoder
  positions excluded (report 003)   weights only, without the position table

HF's `RobertaModel` (no pooler) is fairseq's encoder plus one token-type embedding row.
With `lora` in grid.method, the trainable count of each LoRA setting is shown too.

The vocabulary size comes from --vocab-size, else model.arch.vocab_size, else the
prepared dict.txt (4 specials + its entries + <mask>; run `sweeper prepare SPEC` first).

  sweeper params sweeps/roberta.yaml
  sweeper params sweeps/demo.yaml --vocab-size 1005
  sweeper params sweeps/demo.yaml grid.method=[full,lora] --vocab-size 1005   # overrides
                                                             # before the options
  sweeper params --layers 4 --embed-dim 512 --ffn-dim 512 --heads 8 \\
                 --max-positions 256 --vocab-size 32000
  sweeper params sweeps/roberta.yaml --format json     # for scripts

Exit code 2 when the spec is invalid or the vocabulary size cannot be known.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from pydantic import ValidationError

from sweeper.cli.common import fail, load_or_exit
from sweeper.spec.model_block import ArchConfig
from sweeper.spec.schema import SweepSpec

_ARCH_FLAGS = ("layers", "embed_dim", "ffn_dim", "heads", "max_positions")
"""Flags named after the ArchConfig field they set; all are needed without a SPEC."""


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec", nargs="?", metavar="SPEC", help="sweep file; omit it to count from --arch flags"
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="FIELD=VALUE", help="dotted spec overrides, as for run"
    )
    arch = parser.add_argument_group("architecture (override the spec, or replace it)")
    arch.add_argument("--layers", type=int, help="encoder layers")
    arch.add_argument("--embed-dim", type=int, help="hidden size")
    arch.add_argument("--ffn-dim", type=int, help="feed-forward inner size")
    arch.add_argument("--heads", type=int, help="attention heads")
    arch.add_argument("--max-positions", type=int, help="longest input in tokens")
    arch.add_argument("--vocab-size", type=int, help="embedding rows (specials + dict + <mask>)")
    arch.add_argument("--num-classes", type=int, help="classes of the head (default: spec or 2)")
    parser.add_argument("--format", choices=["table", "json"], default="table")


def run(args: argparse.Namespace) -> int:
    """The report of the spec's task (without a SPEC, the default task's)."""
    spec = load_or_exit(args.spec, args.overrides) if args.spec else None
    if spec is None and args.overrides:
        fail("overrides need a SPEC")
    arch = _arch(args, spec)
    vocab_size, vocab_source = _vocab_size(args, spec, arch)
    from sweeper import backends

    task = spec.task if spec is not None else SweepSpec.model_fields["task"].default
    report = backends.load(backends.task(task).params)
    return report(args, spec, arch, vocab_size, vocab_source)


def classification_params(
    args: argparse.Namespace,
    spec: SweepSpec | None,
    arch: ArchConfig,
    vocab_size: int,
    vocab_source: str,
) -> int:
    """The classification task's report (`sweeper.backends.Task.params`): both
    frameworks' encoder and heads by component, the hand conventions, LoRA."""
    from sweeper.models.params import param_report

    num_classes = args.num_classes or (spec.train.num_classes if spec else 2)
    report = param_report(arch, vocab_size, num_classes, _lora_settings(spec))
    data = {"sweep": spec.name if spec else None, "vocab_source": vocab_source}
    data.update(report.to_json())
    if args.format == "json":
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(format_table(data))
    return 0


def causal_lm_params(
    args: argparse.Namespace,
    spec: SweepSpec | None,
    arch: ArchConfig,
    vocab_size: int,
    vocab_source: str,
) -> int:
    """The causal-LM task's report (`sweeper.backends.Task.params`): the decoder and
    its LoRA settings' trainable counts."""
    from sweeper.models.llama import lm_param_counts

    data = {
        "sweep": spec.name if spec else None,
        **lm_param_counts(arch.model_dump(), vocab_size, _lora_settings(spec)),
    }
    if args.format == "json":
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    print(f"{data['model']} of model.arch, vocabulary {vocab_size}: {data['total']:,} parameters")
    for row in data["lora"]:
        lora = row["lora"]
        print(
            f"  LoRA r={lora['r']} on {', '.join(row['target_modules'])}: "
            f"{row['trainable']:,} trainable of {row['total']:,}"
        )
    return 0


def _arch(args: argparse.Namespace, spec: SweepSpec | None) -> ArchConfig:
    """The spec's arch with the flags given applied, validated like the spec itself."""
    if spec is None:
        absent = [f"--{name.replace('_', '-')}" for name in _ARCH_FLAGS if not getattr(args, name)]
        if absent:
            fail(f"without a SPEC, give the whole architecture: missing {' '.join(absent)}")
    fields = spec.model.arch.model_dump() if spec else {}
    for name in (*_ARCH_FLAGS, "vocab_size"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    try:
        return ArchConfig.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "arch"
        message = error["msg"].removeprefix("Value error, ")
        got = f" (got {error['input']!r})" if error["loc"] else ""
        fail(f"architecture: {field}: {message}{got}")


def _vocab_size(
    args: argparse.Namespace, spec: SweepSpec | None, arch: ArchConfig
) -> tuple[int, str]:
    """The embedding rows to count, and where the number came from (shown to the user)."""
    if arch.vocab_size:
        source = "--vocab-size" if args.vocab_size else "model.arch.vocab_size"
        return arch.vocab_size, source
    if spec is None:
        fail("give --vocab-size (embedding rows: 4 specials + dict entries + <mask>)")
    path = spec.model.dictionary
    if path is None:
        fail(
            f"{args.spec}: model.arch.vocab_size is not set and the dictionary is trained "
            "from the data (model.tokenizer): set model.arch.vocab_size, or pass --vocab-size N"
        )
    if not path.is_file():
        fail(
            f"{args.spec}: model.arch.vocab_size is not set and the dictionary {path} "
            f"does not exist yet: run `sweeper prepare {args.spec}` first, "
            "or pass --vocab-size N"
        )
    from sweeper.models.arch import vocab_size_from_dict

    return vocab_size_from_dict(path), str(path)


def _lora_settings(spec: SweepSpec | None) -> list[dict[str, Any]]:
    """Each distinct resolved LoRA setting of the sweep's LoRA trials, in grid order."""
    if spec is None or "lora" not in spec.grid.method:
        return []
    from sweeper.trial_keys import expand

    settings: list[dict[str, Any]] = []
    for trial in expand(spec)[0]:
        if trial.lora is not None and trial.lora not in settings:
            settings.append(trial.lora)
    return settings


def format_table(data: dict[str, Any]) -> str:
    """The human-readable report: components, totals, hand conventions, LoRA."""
    arch, totals = data["arch"], data["totals"]
    sweep = f"sweep '{data['sweep']}': " if data["sweep"] else ""
    lines = [
        f"{sweep}RoBERTa, {arch['layers']} layers, embed {arch['embed_dim']}, "
        f"FFN {arch['ffn_dim']}, {arch['heads']} heads, max positions {arch['max_positions']} "
        f"({arch['max_positions'] + 2} position rows),",
        f"vocabulary {data['vocab_size']:,} (from {data['vocab_source']}), "
        f"{data['num_classes']} classes",
        "",
        _row("component", "fairseq", "HF"),
    ]
    lines += [_row(name, per["fairseq"], per["hf"]) for name, per in data["components"].items()]
    labels = {
        "encoder": "encoder",
        "classification head": f"classification head ({data['num_classes']} classes)",
        "LM head": "LM head (without the tied output weight)",
        "model": "model as fine-tuned",
    }
    lines.append(_row("-" * 20, "-" * 10, "-" * 10))
    lines += [_row(label, totals[k]["fairseq"], totals[k]["hf"]) for k, label in labels.items()]
    extra = totals["encoder"]["hf"] - totals["encoder"]["fairseq"]
    lines += [
        "",
        "encoder: fairseq encoder.sentence_encoder (no LM head); HF RobertaModel without pooler.",
        "model as fine-tuned: fairseq RobertaModel (encoder + the LM head it keeps, unused,",
        "  + classification head); HF RobertaForSequenceClassification (encoder + head).",
        f"HF - fairseq = {extra:,}: HF's token-type embedding (type_vocab_size 1), "
        "which fairseq does not have.",
        "",
    ]
    lines += _head_lines(data["heads"], data["arch"]["embed_dim"])
    lines += ["", "hand conventions (lab reports):"]
    for conv in data["conventions"]:
        label = f"{conv['name']} ({conv['reports']})"
        rule = textwrap.wrap(conv["rule"], width=58)
        lines.append(f"  {label:<28}{conv['count']:>12,}  {rule[0]}")
        lines += [" " * 44 + more for more in rule[1:]]
    if data["lora"]:
        lines += ["", "LoRA (HF, PEFT SEQ_CLS; the classification head trains too):"]
        for row in data["lora"]:
            s = row["settings"]
            share = 100 * row["trainable"] / row["total"]
            lines.append(
                f"  r {s['r']}, alpha {s['alpha']}, targets {','.join(s['target_modules'])}, "
                f"bias {s['bias']}: {row['trainable']:,} trainable of {row['total']:,} "
                f"({share:.2f}%)"
            )
    return "\n".join(lines)


def _head_lines(heads: dict[str, dict[str, int]], embed_dim: int) -> list[str]:
    """Why the two heads differ: what each chooses among, and its last layer's size."""
    lines = ["heads (the same in both frameworks): each ends in one row per output"]
    for name, role in (("classification head", "fine-tuning"), ("LM head", "pretraining")):
        head = heads[name]
        lines.append(
            f"  {name} ({role}): {head['outputs']:,}-way, output layer "
            f"{head['outputs']:,} x ({embed_dim} + 1) = {head['output layer']:,} "
            f"of {head['parameters']:,}"
        )
    lines.append("  (the LM head's output weight is the token embeddings, tied: counted both")
    lines.append("  here, with the head, and in the encoder above)")
    return lines


def _row(label: str, fairseq: int | str | None, hf: int | str | None) -> str:
    def cell(value: int | str | None) -> str:
        return "-" if value is None else f"{value:,}" if isinstance(value, int) else value

    return f"{label:<42}{cell(fairseq):>14}{cell(hf):>14}"
