"""Trainers: one trial of one backend, run as a subprocess and read as metric events.

Shared by every framework:
  base.py            what a trainer is (`Trainer`, `TrialJob`, `Checkpoints`)
  registry.py        `get_trainer(framework, task)`: a backend's trainer, imported when used
  runner.py          the subprocess: stream its output into events, enforce limits
  notice.py          checkpoint on notice: what a trainer does on SIGTERM, its exit and lines
  events.py          the one metric stream both frameworks produce
  failures.py        why a trainer failed, in one line a researcher can act on
  metrics.py         accuracy from counts: the one expression every trainer uses
  devices.py         the trial's device (NVML first; torch only where a GPU is)
  reload.py          a stored checkpoint's per-example predictions, its metrics from them
  predictions.py     per-example predictions of a trial's best and last checkpoints
  trial_predictions.py  a finished trial's predictions files (valid, test; best, last)
  seed_evidence.py   what a trainer measured of its seeds: start weights, data order
  trial_pipeline.py  one trial end to end: shared inputs, shared initial weights, trainer
  classification.py  the classification task's inputs and jobs (both frameworks' backends)
Per framework:
  fairseq/           fairseq-train and its fixes, checkpoints, the masked_lm pretraining
  hf/                transformers (classifier and causal LM), PEFT's LoRA

Importing this package loads neither torch, fairseq nor transformers.
"""
