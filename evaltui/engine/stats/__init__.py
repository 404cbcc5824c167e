"""Anytime-valid statistics of a run: confidence sequences, stop rules, dealing orders.

Pure numpy, below the scheduler: the runner feeds it outcomes as they arrive and
``evaltui verify`` recomputes it from the episode rows (docs/statistics.md).
"""
