"""Command-line commands, one module each; ``evaltui.cli`` dispatches to them."""
