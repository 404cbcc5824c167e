"""The Slurm executor: the run's K workers as job steps of its Slurm allocation."""
