"""The Ray executor: the run's workers and shared nodesets as actors on a Ray cluster."""
