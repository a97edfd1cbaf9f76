"""`model:`: the architecture, the tokenizer (given files or trained from the data), and
where the pretrained weights come from."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from sweeper.spec.strict import SpecPath, Strict

Objective = Literal["masked_lm", "causal_lm"]
DEFAULT_OBJECTIVE: Objective = "masked_lm"
OBJECTIVE_AXIS = "model.pretrain.objective"
"""The pretraining objective as a grid axis (`grid.params`), spelled as the spec writes
the field; the one field outside `train:` and `lora:` an axis may vary."""


class ArchConfig(Strict):
    """A RoBERTa encoder; the same numbers build the fairseq and the HF model."""

    layers: int = Field(ge=1)
    """Transformer layers (encoder layers; with `task: causal_lm`, decoder layers)."""
    embed_dim: int = Field(ge=8)
    """Hidden size: width of the embeddings and of every layer's output."""
    ffn_dim: int = Field(ge=8)
    """Inner width of each layer's feed-forward block (the decoder's intermediate size)."""
    heads: int = Field(ge=1)
    """Attention heads per layer; must divide `embed_dim`."""
    max_positions: int = Field(ge=8)
    """Longest input in tokens; inputs are truncated to it. Position rows are this + 2
    (fairseq's padding offset)."""
    vocab_size: int | None = Field(None, ge=8)
    """Embedding rows: fairseq's 4 specials + dict.txt entries + `<mask>`. None: read
    from the dict (demo); set it to have `sweeper params` work before any data exists."""
    activation: Literal["gelu", "relu"] = "gelu"
    """Feed-forward activation of the encoder (fairseq `--activation-fn`, HF `hidden_act`).
    Not used with `task: causal_lm`: the Llama-style decoder keeps its own (SiLU)."""

    @model_validator(mode="after")
    def _heads_divide_dim(self) -> ArchConfig:
        if self.embed_dim % self.heads:
            raise ValueError(f"embed_dim {self.embed_dim} is not divisible by heads {self.heads}")
        return self


class PretrainConfig(Strict):
    """Pretraining on the unlabeled corpus, producing the pretrained checkpoint."""

    objective: Objective = DEFAULT_OBJECTIVE
    """What the classifier's encoder learns to predict before fine-tuning: `masked_lm`
    (RoBERTa's: masked tokens from both sides, trained by fairseq) or `causal_lm` (each
    next token from the ones before it, trained by HF's `RobertaForCausalLM`). Either
    checkpoint starts both frameworks' trials. A grid axis too
    (`grid.params: {model.pretrain.objective: [masked_lm, causal_lm]}`): each objective
    is pretrained once and its `pretrained` trials start from it; `random` trials ignore
    it. Part of the trial key when not `masked_lm`. Classification only (a causal-LM
    sweep's decoder has one pretraining)."""

    steps: int = Field(2000, ge=1)
    """Updates the pretraining stage runs."""
    batch_size: int = Field(64, ge=1)
    """Sentences per pretraining update."""
    lr: float = Field(5e-4, gt=0)
    """Peak learning rate of pretraining, reached after warmup, then decayed linearly to 0
    (Adam with weight decay 0.01)."""
    warmup_ratio: float = Field(0.06, ge=0, lt=1)
    """Fraction of `steps` spent warming the learning rate up linearly from 0."""
    mask_prob: float = Field(0.15, gt=0, lt=1)
    """Fraction of tokens masked for fairseq's `masked_lm` (0.15: RoBERTa's). Not used by the
    `causal_lm` objective or a causal-LM sweep's pretraining, which predict every next
    token."""
    seed: int = 0
    """Seed of the pretraining run (fairseq `--seed`; for a causal-LM sweep also the random
    weights the decoder starts from). Part of the checkpoint's cache key."""
    max_tokens_per_sample: int = Field(64, ge=8)
    """Length of the blocks the unlabeled corpus is cut into."""


class TokenizerTraining(Strict):
    """A sentencepiece model trained by sweeper, and fairseq's `dict.txt` built from it."""

    vocab_size: int = Field(ge=50)
    """Pieces sentencepiece is asked for (a small corpus may support fewer: the dict, and
    so the model's vocabulary, follows what was learned)."""
    model_type: Literal["bpe", "unigram"] = "bpe"
    """Sentencepiece's segmentation algorithm."""
    character_coverage: float = Field(1.0, gt=0, le=1)
    """Fraction of the text's characters the pieces must cover; the rarest rest become
    `<unk>` (sentencepiece recommends 0.9995 for languages with large alphabets)."""


class TokenizerConfig(Strict):
    """Where the vocabulary comes from when it is not given as files."""

    train: TokenizerTraining
    """Train sentencepiece on the unlabeled corpus (when one is read) plus the train
    split's texts, then count the pieces of that encoded text into a fairseq `Dictionary`
    (as `fairseq-preprocess` does) and save its `dict.txt`. Cached by content under
    `output_dir/tokenizer/<hash>`: the same texts and settings reuse the files."""


class ModelConfig(Strict):
    arch: ArchConfig
    """The model's shape: a RoBERTa encoder (classification) or a Llama-style decoder
    (`task: causal_lm`), built alike for every framework; a checkpoint must match it."""
    sentencepiece: SpecPath | None = None
    """Sentencepiece model that turns text into pieces (`sentencepiece.bpe.model`). Give it
    with `dictionary`, or leave both unset and set `tokenizer`."""
    dictionary: SpecPath | None = None
    """fairseq `dict.txt`: pieces to ids, shared by both frameworks."""
    tokenizer: TokenizerConfig | None = None
    """Have sweeper train the vocabulary from the data (`tokenizer.train`) instead of
    reading `sentencepiece` and `dictionary`, which must then be unset."""
    checkpoint: SpecPath | None = None
    """Pretrained weights; the `pretrained` init starts here. A fairseq checkpoint
    (`model.pt`), or a HuggingFace model folder (`config.json`, weights, tokenizer: a
    RoBERTa/CamemBERT/XLM-R `*ForMaskedLM` or `*Model`), converted once to fairseq's
    format. Its config must match `model.arch`, and its tokenizer must give
    `model.dictionary`'s pieces the same ids."""
    pretrain: PretrainConfig | None = None
    """Build the pretrained checkpoint with sweeper's own pretraining stage instead, on
    the unlabeled corpus (`data.unlabeled`, by default `data.dir/unlabeled.txt`)."""

    @model_validator(mode="after")
    def _one_vocabulary(self) -> ModelConfig:
        files = [n for n in ("sentencepiece", "dictionary") if getattr(self, n) is not None]
        if self.tokenizer is not None and files:
            raise ValueError(
                f"give either `tokenizer.train` or the files ({', '.join(files)}), not both: "
                "a trained tokenizer replaces model.sentencepiece and model.dictionary"
            )
        if self.tokenizer is None and len(files) < 2:
            raise ValueError(
                "give `sentencepiece` and `dictionary` (ready files), or `tokenizer: {train: "
                "{vocab_size: N}}` to have sweeper train them from the data"
            )
        return self

    @model_validator(mode="after")
    def _one_pretrained_source(self) -> ModelConfig:
        if self.checkpoint is not None and self.pretrain is not None:
            raise ValueError("give either `checkpoint` or `pretrain`, not both")
        return self
