"""Shared nodesets the scheduler hosts for its runs: refcounts, the host process, its files."""
