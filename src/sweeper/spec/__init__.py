"""The sweep file: its schema, how it is read, and how one file builds on another.

  schema.py   `SweepSpec` and its blocks: every field a sweep file may set, documented
  load.py     `load_spec(path, overrides)`: YAML, `extends:`, `${ENV}`, dotted overrides,
              paths; every problem reported at once as `SpecError`
  extends.py  the `extends:` rules and the chain of files a run records

Nothing here imports torch, Ray, MLflow or a trainer: `sweeper validate` and every
layer above read specs cheaply.
"""
