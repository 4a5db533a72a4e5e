"""Fine-tuning runs (`harness run|eval KIND`): one orchestration, each kind of task plugged into it."""
