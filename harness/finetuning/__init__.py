"""Fine-tuning runs (`harness run glue|squad`): one orchestration, GLUE and SQuAD plugged into it."""
