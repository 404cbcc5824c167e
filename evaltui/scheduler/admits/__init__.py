"""Admit entries: queue places for commands that are not eval runs (``evaltui run``)."""
