"""Hyperparameter search: one Optuna study per group, then confirmation over all seeds.

A spec with a `search:` block runs in two stages (`sweeper run`, `run.run_search`):

  search   for each group (framework × init × method × grid.params), Ray Tune runs
           `num_samples` trials on the tuning seed with values sampled by Optuna's TPE
           (through Ray's `OptunaSearch`), optionally stopped early by ASHA; every
           trial is an MLflow run tagged `sweeper.stage=search`.
  confirm  each group's best search configuration (finished, not early-stopped trials,
           by the metric at their best validation point) is run over every grid seed;
           these runs, tagged `sweeper.stage=confirm`, make Table 1 and Table 2.

  run.py       the two stages, built on the grid engine (`sweeper.engine`)
  group.py     one group's search: its study, its Tuner (`sweeper.tune.tuner`)
  searcher.py  the Ray side: sampled config -> trial key and MLflow run, trainable, callback
  confirm.py   the confirm stage's trials: each group's best values over grid.seed

The Optuna studies themselves (storage, names, resume bookkeeping, importances) live in
`sweeper.tracking.study`, because the summariser reads them too. Nothing here imports
the CLI; nothing imports Ray or Optuna at module level except searcher.py, which only
`group.py` imports, inside functions.
"""
