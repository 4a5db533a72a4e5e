"""A grid of fine-tunings beyond one process: models x tasks x seeds, one unit each, run by an executor
(a local pool of worker processes, or Slurm through submitit) and followed from one driver."""
