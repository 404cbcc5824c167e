"""A run's life in the scheduler: its job record, submit/cancel/resume, starting it, its
process, restoring and taking over runs from disk, finished-episode events, the run index."""
