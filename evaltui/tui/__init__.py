"""The evaltui terminal UI (Textual): built with ``evaltui.tui.app.make_app``."""
