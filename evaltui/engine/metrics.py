"""Episode metrics (DESIGN §9). Implemented by a helper; see tests/engine/test_metrics.py."""
