"""Fine-tuning runs (`harness run`): one orchestration, each kind of task (GLUE, SQuAD, your own text,
tagging) plugged into it."""
