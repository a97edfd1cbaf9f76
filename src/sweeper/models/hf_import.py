"""A HuggingFace model folder as the pretrained checkpoint (`model.checkpoint: DIR`).

Researchers mostly hold HF checkpoints (`save_pretrained` folders), while sweeper's
trials both start from one fairseq-format file (docs/architecture.md, invariant 2). So
the folder is converted once into a fairseq `model.pt` (`sweeper.models.convert`,
read backwards) under `output_dir/pretrained/hf-<content hash>/`, and from there on it
is a pretrained checkpoint like any other: the same init files, the same parity.

What is checked first, every problem at once, so a wrong folder is exit 2 naming what
is missing rather than a shape error deep in a trial: `config.json`, a weights file, a
tokenizer, a supported `model_type` and architecture, the spec's `model.arch` against
the config, and the tokenizer's vocabulary against `model.dictionary` (sweeper encodes
text with `model.sentencepiece` + `model.dictionary`; a model trained on other ids
would be fine-tuned on nonsense).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

    from sweeper.spec.model_block import ArchConfig

SUPPORTED_TYPES = ("roberta", "camembert", "xlm-roberta")
"""`model_type`s that are fairseq's RoBERTa under HF names."""
ARCHITECTURE_SUFFIXES = ("ForMaskedLM", "ForCausalLM", "Model")
"""A pretrained encoder: its masked-LM or left-to-right LM head (the same tensors under
the same names) is kept, any other task's head refused."""
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = (
    "tokenizer.json",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "spiece.model",
    "vocab.json",
)
CONVERTED = "model.pt"


class HfFolderError(ValueError):
    """Everything wrong with a folder given as an HF checkpoint, one problem per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class HfFolder:
    """A folder that passed `inspect`: its config and the files that define it."""

    path: Path
    config: dict[str, Any]
    weights: Path

    @property
    def architecture(self) -> str:
        return str((self.config.get("architectures") or ["?"])[0])


def is_hf_folder(path: Path) -> bool:
    """`model.checkpoint` names a folder (an HF model) rather than a fairseq file."""
    return Path(path).is_dir()


def inspect(folder: Path) -> HfFolder:
    """The folder's config and weights, or HfFolderError naming every missing piece."""
    problems: list[str] = []
    config: dict[str, Any] = {}
    config_file = folder / "config.json"
    if not config_file.is_file():
        problems.append("no config.json (an HF model folder, as save_pretrained writes it)")
    else:
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"config.json is not valid JSON: {exc}")
    weights = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if weights is None:
        problems.append(f"no weights file (one of {', '.join(WEIGHT_FILES)})")
    if not any((folder / n).is_file() for n in TOKENIZER_FILES):
        problems.append(f"no tokenizer (one of {', '.join(TOKENIZER_FILES)})")
    if config:
        problems += _unsupported(config)
    if problems:
        raise HfFolderError(problems)
    assert weights is not None
    return HfFolder(folder, config, weights)


def _unsupported(config: dict[str, Any]) -> list[str]:
    kind = config.get("model_type")
    if kind not in SUPPORTED_TYPES:
        return [f"unsupported model_type {kind!r} (supported: {', '.join(SUPPORTED_TYPES)})"]
    names = config.get("architectures") or []
    if names and not any(str(n).endswith(ARCHITECTURE_SUFFIXES) for n in names):
        return [
            f"unsupported architecture {names[0]!r} (a *ForMaskedLM, *ForCausalLM or "
            "*Model: the pretrained encoder, without another task's head)"
        ]
    return []


def folder_problems(
    folder: Path,
    arch: ArchConfig,
    vocab_size: int | None,
    dictionary: Path | None,
    ids: dict[str, int] | None,
) -> list[str]:
    """Everything that stops `folder` from being the spec's pretrained encoder: missing
    files, an unsupported type, another arch, another vocabulary (when `ids`, the
    dictionary's piece -> fairseq id, are known)."""
    try:
        hf = inspect(folder)
    except HfFolderError as exc:
        return exc.problems
    found = arch_problems(hf, arch, vocab_size)
    if ids is not None and dictionary is not None:
        found += vocabulary_problems(folder, ids, dictionary)
    return found


def arch_problems(hf: HfFolder, arch: ArchConfig, vocab_size: int | None) -> list[str]:
    """Where the folder's config differs from the spec's `model.arch` (and vocabulary)."""
    from sweeper.models.arch import position_rows

    expected = {
        "num_hidden_layers": arch.layers,
        "hidden_size": arch.embed_dim,
        "intermediate_size": arch.ffn_dim,
        "num_attention_heads": arch.heads,
        "max_position_embeddings": position_rows(arch),
        "hidden_act": arch.activation,
    }
    if vocab_size is not None:
        expected["vocab_size"] = vocab_size
    return [
        f"config.json {name} is {hf.config.get(name)!r}, the spec's model.arch needs {want!r}"
        for name, want in expected.items()
        if hf.config.get(name) != want
    ]


def vocabulary_problems(folder: Path, ours: dict[str, int], dictionary: Path) -> list[str]:
    """Pieces of `model.dictionary` (`ours`: piece -> fairseq id) to which the folder's
    tokenizer gives another id. Special tokens are not compared: HF tokenizers name
    and number them their own way, and sweeper adds them itself."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    vocab = tokenizer.get_vocab()
    specials = set(tokenizer.all_special_tokens) | {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}
    differ = [
        (piece, i, vocab.get(piece))
        for piece, i in ours.items()
        if piece not in specials and vocab.get(piece) != i
    ]
    if not differ:
        return []
    piece, mine, theirs = differ[0]
    return [
        f"the folder's tokenizer gives {len(differ)} of {len(ours)} pieces of model.dictionary "
        f"other ids (e.g. {piece!r}: {theirs} there, {mine} in {dictionary.name}): the model "
        "was trained on another vocabulary; give the model.sentencepiece and "
        "model.dictionary it was trained with"
    ]


def read_weights(hf: HfFolder) -> dict[str, Tensor]:
    """Every tensor of the folder's weights (single or sharded, safetensors or torch)."""
    import torch

    files = [hf.weights]
    if hf.weights.name.endswith(".index.json"):
        index = json.loads(hf.weights.read_text(encoding="utf-8"))
        files = [hf.path / name for name in sorted(set(index["weight_map"].values()))]
    state: dict[str, Tensor] = {}
    for path in files:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state.update(load_file(str(path)))
        else:
            state.update(torch.load(path, map_location="cpu", weights_only=True))
    return state


def import_checkpoint(folder: Path, cache_root: Path) -> Path:
    """The fairseq `model.pt` converted from an HF folder, written once per content."""
    from sweeper.hashing import tree_sha256

    hf = inspect(folder)
    path = cache_root / f"hf-{tree_sha256(folder)[:16]}" / CONVERTED
    if path.is_file():
        return path
    source = {"hf_folder": str(folder), "architecture": hf.architecture}
    write_converted(read_weights(hf), source, path)
    return path


def write_converted(state: dict[str, Tensor], source: dict[str, Any], path: Path) -> None:
    """Write an HF RoBERTa-family state dict as the fairseq `model.pt` sweeper's trials
    start from (`sweeper.models.init` reads it like a fairseq checkpoint), atomically;
    `source` (plain values) says where it came from."""
    from sweeper.models.convert import hf_to_fairseq
    from sweeper.models.init import atomic_save

    converted = hf_to_fairseq(state)
    atomic_save({"model": converted, "args": None, "cfg": None, "sweeper_source": source}, path)
