"""The headless engine: one eval run, from a JobSpec to a complete run dir.

Nothing under this package imports Textual, FastAPI, ``evaltui.tui`` or ``evaltui.api``.
"""
