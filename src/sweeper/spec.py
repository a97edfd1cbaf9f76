"""The sweep file schema: what a researcher may write, and what each field means.

Every field carries a docstring because the schema *is* the product's language: the
README's spec reference and `sweeper validate` messages both come from here. Loading
(YAML, env interpolation, overrides, path resolution, error formatting) lives in
`sweeper.specio`, keeping this module a plain, readable schema.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sweeper.record_names import HIGHER_IS_BETTER, TASK_CAUSAL_LM, TASK_CLASSIFICATION, TASK_METRICS


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    """Relative paths mean "relative to the spec file", never to the caller's cwd."""
    base = (info.context or {}).get("base_dir")
    value = Path(value).expanduser()
    if base is not None and not value.is_absolute():
        value = Path(base) / value
    return Path(value).resolve() if base is not None else value


SpecPath = Annotated[Path, AfterValidator(_resolve_path)]
"""A filesystem path; relative values resolve against the spec file's folder."""


class Strict(BaseModel):
    """Base for every block: unknown keys are errors (with a did-you-mean)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TrackingConfig(Strict):
    uri: str | None = None
    """MLflow tracking URI (`${MLFLOW_TRACKING_URI}` works). `--tracking-uri` wins over it.
    Unset: `$MLFLOW_TRACKING_URI`, else the server of a running `sweeper cluster up`, else
    a SQLite store in `output_dir/mlflow.db` with artifacts in `output_dir/mlartifacts`."""
    experiment: str | None = None
    """MLflow experiment name; defaults to the sweep name."""

    @field_validator("uri", mode="before")
    @classmethod
    def _empty_is_default(cls, value: object) -> object:
        """`${MLFLOW_TRACKING_URI:-}` with the variable unset means "use the default"."""
        return None if value == "" else value


class GenerateConfig(Strict):
    """The deterministic demo corpus (see `sweeper.data.demo_corpus`)."""

    seed: int = 0
    """Seed of the generator: the same seed always writes the same files."""
    train_size: int = Field(1800, ge=10)
    """Labeled training reviews (the lab has 1,800)."""
    valid_size: int = Field(200, ge=10)
    """Labeled validation reviews: the split that picks each trial's best checkpoint."""
    test_size: int = Field(200, ge=10)
    """Labeled test reviews: the split whose metrics the summary reports."""
    unlabeled_size: int = Field(20000, ge=100)
    """Unlabeled sentences for the pretraining stage."""
    label_noise: float = Field(0.0, ge=0.0, lt=0.5)
    """Fraction of labels flipped in every split, to bring accuracies off 100%."""
    vocab_size: int = Field(1000, ge=50)
    """Sentencepiece vocabulary trained on the generated text."""


class DataConfig(Strict):
    source: Literal["files", "generated"] = "files"
    """`files`: user-supplied raw splits under `dir`; `generated`: the demo corpus is
    written into `dir` first."""
    dir: SpecPath
    """Folder holding `{split}.{text_suffix}` and `{split}.{label_suffix}` per split, and
    with `model.pretrain` the unlabeled corpus `unlabeled.txt` (one sentence per line)."""
    splits: dict[Literal["train", "valid", "test"], str] = Field(
        default_factory=lambda: {"train": "train", "valid": "valid", "test": "test"}
    )
    """File stem of each split (CLS books uses train/valid/test)."""
    text_suffix: str = "review"
    """Raw text files end in this suffix: one review per line."""
    label_suffix: str = "label"
    """Label files end in this suffix: one label per line, aligned with the text."""
    text2_suffix: str | None = None
    """Sentence pairs (paraphrase, inference: PAWS-X, XNLI): each example's second text
    is in `{split}.{text2_suffix}`, line by line with the first. Both frameworks get
    RoBERTa's pair layout `<s> A </s></s> B </s>` (fairseq `input0`/`input1`); a pair
    longer than `max_positions` loses tokens from its longer text first. With
    `source: generated`, the demo writes a pair task: do two reviews share an opinion?
    (label `labels[1]`: same, `labels[0]`: opposite). None: single texts."""
    labels: list[str] = Field(default_factory=lambda: ["0", "1"], min_length=2)
    """Allowed labels; their order fixes the class index."""
    generate: GenerateConfig | None = None
    """Generator settings; required when `source: generated`."""
    answers: dict[str, str] | None = None
    """`task: causal_lm` only: label -> answer text, turning labeled texts into prompt ->
    answer pairs (the demo's reviews -> verdicts). Unset: each label line is the answer."""

    @model_validator(mode="after")
    def _suffixes_differ(self) -> DataConfig:
        suffixes = [self.text_suffix, self.label_suffix, self.text2_suffix]
        named = [s for s in suffixes if s is not None]
        if len(set(named)) != len(named):
            raise ValueError(
                f"text_suffix, label_suffix and text2_suffix must differ (got {named})"
            )
        return self

    @model_validator(mode="after")
    def _generated_needs_settings(self) -> DataConfig:
        if self.source == "generated" and self.generate is None:
            raise ValueError("`source: generated` needs a `generate:` block")
        return self


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
    """fairseq `masked_lm` on the unlabeled corpus, producing the pretrained checkpoint."""

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
    """Fraction of tokens masked for fairseq's `masked_lm` (0.15: RoBERTa's). Not used by a
    causal-LM sweep's pretraining, which predicts every next token."""
    seed: int = 0
    """Seed of the pretraining run (fairseq `--seed`; for a causal-LM sweep also the random
    weights the decoder starts from). Part of the checkpoint's cache key."""
    max_tokens_per_sample: int = Field(64, ge=8)
    """Length of the blocks the unlabeled corpus is cut into."""


class ModelConfig(Strict):
    arch: ArchConfig
    """The model's shape: a RoBERTa encoder (classification) or a Llama-style decoder
    (`task: causal_lm`), built alike for every framework; a checkpoint must match it."""
    sentencepiece: SpecPath
    """Sentencepiece model that turns text into pieces (`sentencepiece.bpe.model`)."""
    dictionary: SpecPath
    """fairseq `dict.txt`: pieces to ids, shared by both frameworks."""
    checkpoint: SpecPath | None = None
    """Pretrained weights; the `pretrained` init starts here. A fairseq checkpoint
    (`model.pt`), or a HuggingFace model folder (`config.json`, weights, tokenizer: a
    RoBERTa/CamemBERT/XLM-R `*ForMaskedLM` or `*Model`), converted once to fairseq's
    format. Its config must match `model.arch`, and its tokenizer must give
    `model.dictionary`'s pieces the same ids."""
    pretrain: PretrainConfig | None = None
    """Build the pretrained checkpoint with sweeper's own pretraining stage instead, on
    `data.dir/unlabeled.txt`."""

    @model_validator(mode="after")
    def _one_pretrained_source(self) -> ModelConfig:
        if self.checkpoint is not None and self.pretrain is not None:
            raise ValueError("give either `checkpoint` or `pretrain`, not both")
        return self


Precision = Literal["fp32", "fp16", "bf16"]


class TrainConfig(Strict):
    """The fine-tuning recipe; both frameworks get these same numbers."""

    epochs: int = Field(5, ge=1)
    """Passes over the training split. Validation and test are measured at the end of
    each epoch; updates in all: epochs × ceil(training examples / batch_size)."""
    batch_size: int = Field(8, ge=1)
    """Training examples per update, exactly (fairseq and HF alike; evaluation batches are
    fixed separately)."""
    lr: float = Field(1e-5, gt=0)
    """Peak learning rate, reached after warmup, then decayed linearly to 0 at the last
    update."""
    warmup_ratio: float = Field(0.06, ge=0, lt=1)
    """Fraction of the total updates spent warming the learning rate up."""
    lr_scheduler: Literal["polynomial", "linear"] = "polynomial"
    """Decay after warmup (polynomial with power 1 is linear, as in fairseq)."""
    weight_decay: float = Field(0.1, ge=0)
    """Decoupled (AdamW) weight decay, applied to every parameter, biases and LayerNorm
    included, as fairseq's adam does (transformers' own default would exempt them)."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Dropout probability of the encoder's hidden layers (fairseq `--dropout`, HF
    `hidden_dropout_prob`). Not used with `task: causal_lm` (see `attention_dropout`)."""
    attention_dropout: float = Field(0.1, ge=0, lt=1)
    """Dropout probability on attention weights (fairseq `--attention-dropout`, HF
    `attention_probs_dropout_prob`; with `task: causal_lm`, the decoder's only dropout)."""
    adam_betas: tuple[float, float] = (0.9, 0.98)
    """Adam's (beta1, beta2): decay rates of the gradient's running mean and square."""
    adam_eps: float = Field(1e-6, gt=0)
    """Adam's epsilon, added to the denominator for numerical stability."""
    clip_norm: float = Field(0.0, ge=0)
    """Gradient clipping norm; 0 disables it."""
    num_classes: int = Field(2, ge=2)
    """Outputs of the classifier head; at least the number of labels in the data (exit 2
    before anything runs otherwise). Not used with `task: causal_lm`."""
    precision: Precision = "fp32"
    """Arithmetic of fine-tuning (not of the pretraining stage): `fp32`; `bf16` (CPUs with
    AVX-512 BF16 or AMX run it natively, older ones emulate it slowly; CUDA from Ampere
    on); `fp16` (CUDA only: a spec asking for it without `resources.gpu` is refused).
    Mapped to fairseq's `--bf16`/`--fp16` and transformers' `bf16`/`fp16`. A grid axis
    like any other; part of the trial key when not fp32."""
    timeout_min: float | None = Field(None, gt=0)
    """Per-trial wall-clock limit in minutes; a trial past it fails with that reason."""


class LoraConfig(Strict):
    """PEFT LoRA settings, used by trials whose method is `lora`."""

    r: int = Field(8, ge=1)
    """Rank of the adapter matrices: more is more trainable parameters (PEFT `r`)."""
    alpha: int = Field(16, ge=1)
    """Scaling of the adapters' update, applied as alpha / r (PEFT `lora_alpha`)."""
    dropout: float = Field(0.05, ge=0, lt=1)
    """Dropout probability on the adapters' input (PEFT `lora_dropout`)."""
    target_modules: list[str] = Field(default_factory=lambda: ["query", "value"], min_length=1)
    """Names of the modules that get adapters (default: RoBERTa attention's query and
    value projections). `task: causal_lm` also takes `attention` (`q_proj, k_proj, v_proj,
    o_proj`) and `all-linear` (those, the MLP's three, `embed_tokens` and `lm_head`)."""
    bias: Literal["none", "all", "lora_only"] = "none"
    """Which biases train too (PEFT `bias`): none, all of them, or those of the adapted
    modules only."""


def _check_tunable(key: str) -> None:
    """Grid and search axes may vary recipe fields (`train.*`) and LoRA fields (`lora.*`)."""
    blocks: dict[str, type[BaseModel]] = {"train": TrainConfig, "lora": LoraConfig}
    block, _, name = key.partition(".")
    if block not in blocks or name not in blocks[block].model_fields:
        known = [f"{b}.{f}" for b, m in blocks.items() for f in m.model_fields]
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (train.* or lora.* fields)"
        raise ValueError(f"{key!r} is not a tunable field{hint}")


Init = Literal["pretrained", "random"]
Method = Literal["full", "lora"]


class GridConfig(Strict):
    """Axes crossed into trials; each combination is one trial key."""

    seed: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    """Seeds; each makes one trial per combination. A seed fixes the trial's starting
    weights (random init, classifier head) and its trainer's data order and dropout:
    trials of one seed share their starting weights, so comparisons pair on seed."""
    init: list[Init] = Field(default_factory=lambda: ["pretrained", "random"], min_length=1)
    """`pretrained`: start from `model.checkpoint` or the `model.pretrain` stage's output;
    `random`: from weights drawn under the trial's seed."""
    framework: list[str] = Field(default_factory=lambda: ["fairseq", "hf"], min_length=1)
    """Registered frameworks (`fairseq`, `hf`; plugins add more, see `sweeper.frameworks`).
    A name nobody registered is reported by the spec loader with the registered ones."""
    method: list[Method] = Field(default_factory=lambda: ["full"], min_length=1)
    """`full`: every weight trains; `lora`: only the `lora:` adapters (and a classifier's
    head) train, through PEFT, on `hf` only (other combinations are skipped with a note)."""
    params: dict[str, list[Any]] = Field(default_factory=dict)
    """Extra axes by dotted field, e.g. `train.lr: [1e-5, 3e-5]` or `lora.r: [8, 16]`."""

    @model_validator(mode="after")
    def _known_params(self) -> GridConfig:
        for key, values in self.params.items():
            _check_tunable(key)
            if not values:
                raise ValueError(f"grid.params.{key} needs at least one value")
        return self


class SearchParam(Strict):
    type: Literal["loguniform", "uniform", "int", "choice"]
    """The distribution: `uniform` (floats in [low, high]), `loguniform` (the same on a log
    scale), `int` (integers low..high, both included), `choice` (one of `values`)."""
    low: float | None = None
    """Lower bound of `uniform`, `loguniform` (above 0 there) and `int`."""
    high: float | None = None
    """Upper bound; must be above `low`."""
    values: list[Any] | None = None
    """The options of a `choice` (non-empty)."""

    @model_validator(mode="after")
    def _bounds_or_values(self) -> SearchParam:
        if self.type == "choice":
            if not self.values:
                raise ValueError("`choice` needs a non-empty `values` list")
        elif self.low is None or self.high is None or self.low >= self.high:
            raise ValueError(f"`{self.type}` needs `low` < `high`")
        elif self.type == "loguniform" and self.low <= 0:
            raise ValueError("`loguniform` needs `low` > 0")
        return self


class AshaConfig(Strict):
    type: Literal["asha"] = "asha"
    """The scheduler: `asha` (Ray Tune's ASHA), the only one."""
    grace_period: int = Field(1, ge=1)
    """Validation points a trial gets before it can be stopped."""
    reduction_factor: int = Field(2, ge=2)
    """At each rung (grace_period × reduction_factor^k validation points) a trial below
    the top 1/reduction_factor of the trials that reached it is stopped."""


class SearchConfig(Strict):
    """Optuna search per group (init × framework × method), then confirmation."""

    algorithm: Literal["optuna"] = "optuna"
    """`optuna`: TPE through Ray Tune's OptunaSearch (random for the first max(2,
    num_samples / 2) trials, at most 10), seeded by the study name."""
    metric: str = "valid_accuracy"
    """The validation metric a search trial is judged by, at its best validation point
    (ties: the earliest); one the task's trainers report (`valid_<m>`)."""
    mode: Literal["max", "min"] = "max"
    """`max`: a higher `metric` is better; `min`: a lower one."""
    num_samples: int = Field(8, ge=1)
    """Search trials per group; `--resume` runs only those not completed yet."""
    space: dict[str, SearchParam] = Field(min_length=1)
    """Dotted field -> distribution, e.g. `train.lr: {type: loguniform, ...}`."""
    scheduler: AshaConfig | None = None
    """Early stopping of search trials (ASHA); an early-stopped trial enters neither the
    tables nor the choice of the best configuration. Unset: every trial runs to the end."""
    tuning_seeds: list[int] = Field(default_factory=lambda: [1], min_length=1)
    """Seeds the search stage runs on; the confirm stage then uses grid.seed, which must
    not contain them (see allow_seed_overlap)."""
    allow_seed_overlap: bool = False
    """Let grid.seed repeat a tuning seed. The winner was picked for its score on the
    tuning seed, so confirming on that seed again reports a score biased upward
    (selection bias); allowed only when said here, and the summary then flags it."""

    @model_validator(mode="after")
    def _known_space(self) -> SearchConfig:
        for key in self.space:
            _check_tunable(key)
        return self


class SelectConfig(Strict):
    """How each trial's best checkpoint is picked, and what the summary reports there.
    Names are logged metric names: `valid_<m>` / `test_<m>` for a measurement `m` the
    task's trainers make (classification: loss, accuracy)."""

    metric: str = "valid_accuracy"
    """The validation metric whose best step is the trial's best checkpoint (ties: the
    earliest step); it is also what Table 1 shows as "Valid"."""
    mode: Literal["max", "min"] | None = None
    """`max` or `min`; unset: the metric's own direction (accuracy max, loss min)."""
    report: list[str] = Field(default_factory=lambda: ["test_accuracy"], min_length=1)
    """Test metrics read at the best checkpoint. The first is the one Table 2, the
    comparisons, figures and `--evaluate` are about; the others get a Table 1 column
    and a Table 2 mean."""

    def direction(self) -> Literal["max", "min"]:
        if self.mode is not None:
            return self.mode
        return "max" if self.metric.removeprefix("valid_") in HIGHER_IS_BETTER else "min"

    def unknown(self, measured: tuple[str, ...]) -> list[str]:
        """Problems with metrics no trainer of the task reports (`measured`: its names)."""
        valid = [f"valid_{m}" for m in measured]
        test = [f"test_{m}" for m in measured]
        problems = []
        if self.metric not in valid:
            problems.append(
                f"metric {self.metric!r} is not reported by any trainer; "
                f"the validation metrics that exist: {', '.join(valid)}"
            )
        problems += [
            f"report {name!r} is not reported by any trainer; the test metrics "
            f"that exist: {', '.join(test)}"
            for name in self.report
            if name not in test
        ]
        return problems


LM_SELECT = {
    "metric": "valid_exact_match",
    "report": ["test_exact_match", "test_perplexity"],
}
"""`select:` of a causal-LM sweep that sets none."""


class CompareConfig(Strict):
    """How the summary decides its comparisons (docs/architecture.md, "Statistics")."""

    margin: float | None = Field(None, gt=0)
    """Equivalence margin D in the compared metric's units (accuracy: percentage
    points). With it a comparison can also end "equivalent within ±D": its decision
    interval lies inside (-D, D). `--until-decided` then stops a comparison decided
    either way. Unset: only "better" or "undecided", and the summary says which margin
    the data would already support. `--margin D` on the command line sets it too."""


class ResourcesConfig(Strict):
    cpu: float = Field(1.0, gt=0)
    """CPUs per trial; the trainer's thread count follows it."""
    gpu: float = Field(0.0, ge=0)
    """GPUs per trial; fractions let several small trials share one GPU."""


class SweepSpec(Strict):
    """One sweep: a grid of fine-tuning trials and where their record goes."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    """Sweep name: the MLflow experiment and part of every trial key."""
    task: Literal["classification", "causal_lm"] = "classification"
    """`classification`: a sentence classifier (fairseq or HF). `causal_lm`: a decoder
    (`model.arch` as a Llama-style model, or a local HF causal-LM folder) fine-tuned on
    prompt -> answer pairs with HF (transformers + PEFT), loss on the answer tokens;
    validation and test report loss, perplexity and exact match of greedy answers."""
    output_dir: SpecPath = Path("../runs/sweep")
    """Where prepared data, checkpoints and the default MLflow store go."""
    tracking: TrackingConfig = TrackingConfig()
    """Where the MLflow record goes."""
    data: DataConfig
    """The labeled splits (and unlabeled corpus): files, or the generated demo corpus."""
    model: ModelConfig
    """Architecture, vocabulary, and where the `pretrained` init's weights come from."""
    train: TrainConfig = TrainConfig()
    """The fine-tuning recipe every trial shares (`grid.params` and `search.space` may
    vary its fields)."""
    lora: LoraConfig = LoraConfig()
    """LoRA settings for the trials whose method is `lora`; ignored by the others."""
    grid: GridConfig = GridConfig()
    """The axes crossed into trials: seed × init × framework × method × `params`."""
    search: SearchConfig | None = None
    """Hyperparameter search per group, then confirmation over `grid.seed`. Unset: the
    grid runs as written."""
    select: SelectConfig = SelectConfig()
    """Which checkpoint of a trial is its best, and which test metrics are read there."""
    compare: CompareConfig = CompareConfig()
    """How the summary's comparisons are decided."""
    resources: ResourcesConfig = ResourcesConfig()
    """What one trial reserves on a Ray node; Ray packs trials onto nodes by it."""
    max_concurrent: int | None = Field(None, ge=1)
    """Trials running at once; None: as many as the resources allow."""
    retries: int = Field(2, ge=0)
    """Times a failing trial is retried from its last checkpoint."""
    sync_every: int = Field(1, ge=0)
    """Validation points between copies of a trial's last checkpoint (and events) to its
    run's artifacts, so that a retry on another node resumes from there instead of step
    0. Only with a remote artifact store (a tracking server, S3): with a local store
    every trial runs where its folder is. 1 (default): every validation point; N: every
    Nth (less upload traffic, more steps redone after a node loss); 0: never."""

    @model_validator(mode="after")
    def _confirm_seeds_not_tuned(self) -> SweepSpec:
        search = self.search
        if search is None or search.allow_seed_overlap:
            return self
        overlap = sorted(set(self.grid.seed) & set(search.tuning_seeds))
        if overlap:
            raise ValueError(
                f"grid.seed (the confirm stage's seeds) repeats tuning seed(s) {overlap}: "
                "their confirm scores would be biased upward by the selection. Drop them "
                "from grid.seed, or set search.allow_seed_overlap: true"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _task_default_select(cls, data: Any) -> Any:
        """A causal-LM sweep picks by exact match and reports exact match and perplexity
        unless its `select:` says otherwise (classification's defaults name metrics it
        does not have)."""
        given = data.get("select", {}) if isinstance(data, dict) else None
        if isinstance(given, dict) and data.get("task") == TASK_CAUSAL_LM:
            return {**data, "select": {**LM_SELECT, **given}}
        return data  # a select: that is no mapping is reported by its field

    @field_validator("select")
    @classmethod
    def _selected_metrics_exist(cls, select: SelectConfig, info: ValidationInfo) -> SelectConfig:
        problems = select.unknown(TASK_METRICS[info.data.get("task", TASK_CLASSIFICATION)])
        if problems:
            raise ValueError("; ".join(problems))
        return select

    @model_validator(mode="after")
    def _searched_metric_exists(self) -> SweepSpec:
        measured = [f"valid_{m}" for m in TASK_METRICS[self.task]]
        if self.search is not None and self.search.metric not in measured:
            raise ValueError(
                f"search.metric {self.search.metric!r} is not reported by any trainer; the "
                f"validation metrics that exist: {', '.join(measured)}"
            )
        return self

    @model_validator(mode="after")
    def _causal_lm_runs_on_hf(self) -> SweepSpec:
        if self.task == TASK_CAUSAL_LM:
            others = [f for f in self.grid.framework if f != "hf"]
            if others:
                raise ValueError(
                    f"grid.framework {others} cannot run task causal_lm: causal-LM trials "
                    "run on hf (transformers + PEFT) only"
                )
        return self

    @model_validator(mode="after")
    def _fp16_needs_cuda(self) -> SweepSpec:
        asked = {self.train.precision, *self.grid.params.get("train.precision", [])}
        searched = self.search.space.get("train.precision") if self.search else None
        asked |= set(searched.values or []) if searched else set()
        if "fp16" in asked and self.resources.gpu == 0:
            raise ValueError(
                "train.precision fp16 runs on CUDA only, and resources.gpu is 0 (trials run "
                "on CPU): use bf16 or fp32 on CPU, or give each trial a GPU"
            )
        return self

    @model_validator(mode="after")
    def _pretrained_needs_a_source(self) -> SweepSpec:
        if "pretrained" in self.grid.init and not (self.model.checkpoint or self.model.pretrain):
            raise ValueError(
                "grid.init has `pretrained` but model has neither `checkpoint` nor `pretrain`"
            )
        return self
