"""The Tune layer: everything sweeper asks of Ray Tune, shaped like Ray's own split.

  trainable.py       trial side: what runs inside a Ray trial (Reporter, run_ray_trial)
  system_metrics.py  trial side: the node's CPU, memory and GPU use, logged with the trial
  preemption.py      trial side: the drain watcher, the preemption count, TrialPreempted
  tuner.py           the one Tuner builder, for the grid and the search stage alike
  cluster.py         driver side: join a Ray cluster or start Ray on this machine
  callback.py        driver side: the Tune callback recording each trial (MLflow, progress)
  progress.py        the live progress view the callback feeds
  pretrain_task.py   the pretraining stage as a Ray task beside the trials, and the gate
                     a pretrained trial waits at

Only callback.py and preemption.py import Ray at module level; the engine and the
search stage import them inside functions, so `sweeper --help` never loads Ray.
"""
