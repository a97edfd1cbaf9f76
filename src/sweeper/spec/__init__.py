"""The sweep file: its schema, how it is read, and how one file builds on another.

  schema.py        `SweepSpec`, the whole file: `tracking:`, `resources:` and the
                   checks that span blocks
  strict.py        the base every block shares (unknown keys are errors) and `SpecPath`
  data_block.py    `data:`: splits, formats, fields, labels, the unlabeled corpus
  model_block.py   `model:`: architecture, tokenizer, pretrained weights or pretraining
  train_block.py   `train:` and `lora:`: the recipe, and which fields axes may vary
  axes_block.py    `grid:` and `search:`: the axes crossed into trials, Optuna's space
  select_block.py  `select:` and `compare:`: the checkpoint that counts, the comparisons
  cost_block.py    `cost:`: prices per GPU- and CPU-hour for the summary's cost lines
  load.py          `load_spec(path, overrides)`: YAML, `extends:`, `${ENV}`, dotted
                   overrides, paths; every problem reported at once as `SpecError`
  extends.py       the `extends:` rules and the chain of files a run records

Every field carries a docstring: docs/spec.md is generated from them (`make spec-doc`).
Nothing here imports torch, Ray, MLflow or a trainer: `sweeper validate` and every
layer above read specs cheaply.
"""
