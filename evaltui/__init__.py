"""evaltui: score agent graphs on benchmark splits, in parallel, on a shared GPU machine."""

__version__ = "0.1.0"
