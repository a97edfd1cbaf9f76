"""The fairseq side of a classification sweep: trainer, child process, checkpoints.

  fairseq_trainer.py     the trainer as the parent sees it: one trial is one
                         `fairseq-train --task sentence_prediction` run; log parsing
  fairseq_main.py        the child: fairseq-train with the fixes this stack needs (exact
                         accuracy from counts, earliest best, torn checkpoints, bf16)
  fairseq_notice.py      the child's answer to SIGTERM: checkpoint_last.pt at the
                         current update, then stop (`sweeper.trainers.notice`)
  fairseq_predict.py     the child's predictions files: best and last checkpoints on
                         valid and test, once training has finished
  fairseq_checkpoints.py fairseq's checkpoint file names and the weights-only allow-list
  fairseq_seeds.py       which seed drives what in the child (data order: --seed; dropout:
                         the job's own), and what it records of it (seeds.json)
  fairseq_pretrain.py    the pretraining stage: `masked_lm` on the unlabeled corpus, once

Importing this package loads neither torch nor fairseq.
"""
