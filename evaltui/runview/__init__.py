"""Headless models behind the TUI's run and replay screens.

Nothing here imports Textual: these modules read run dirs (a line index over log.jsonl,
an episode-dir replay model, an incremental run-dir watcher feeding a run model) and
report through return values or injected callbacks, so they can be tested, benchmarked
and reused without a UI.
"""
