"""The HuggingFace side: the classifier and the causal-LM task, parent and children.

  hf_trainer.py   the classifier's trainer as the parent sees it: command line, events
  hf_main.py      the classifier's child process (transformers Trainer, LoRA by PEFT)
  hf_notice.py    both children's answer to SIGTERM: a checkpoint at the current step
  hf_predict.py   both children's predictions files: best and last checkpoints on
                  valid and test, once training has finished
  hf_data.py      token-id datasets, batching and accuracy from counts for `hf_main`
  hf_seeds.py     which seed drives what in both children, and what they record of it
  lm_main.py      the causal-LM child: answer-only loss, perplexity, exact match
  lm_data.py      prompt/answer batches and the causal-LM measurements (also `--evaluate`)
  lm_trial.py     the causal-LM backend: inputs, trial jobs, its trainer (`LMTrainer`)
  lm_pretrain.py  the pretraining stage of a causal-LM sweep's `model.arch` decoder
  roberta_causal_pretrain.py  the classifier's RoBERTa pretrained left to right (causal
                  LM), the other objective beside fairseq's masked LM
  roberta_causal_main.py      its child process: `RobertaForCausalLM` on the masked-LM
                  stage's corpus, initial weights and recipe

Importing this package loads neither torch nor transformers.
"""
