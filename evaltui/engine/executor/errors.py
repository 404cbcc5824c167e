"""The errors that end a run's executor, and so the run (``failed``, with the message)."""

from __future__ import annotations


class ExecutorError(RuntimeError):
    """The executor cannot run the episodes at all (its message is the run's error)."""


class NodesetBuildError(RuntimeError):
    """The graph's nodesets cannot be built or kept up: workers keep failing to start, or
    a shared nodeset's host cannot be (re)started. The run's error names its class."""
