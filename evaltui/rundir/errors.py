"""Errors of run-dir I/O that the CLI catches before importing anything heavy."""

from __future__ import annotations


class StateDirError(OSError):
    """The state dir cannot be made or used; the message is one line for the user."""
