"""Regenerate the BabyAI manifests shipped in evaltui/benchmarks/babyai/data/.

Usage: python scripts/make_babyai_manifests.py [--split GoTo] [--count 500] [--out DIR]
"""

from __future__ import annotations

import sys

from evaltui.benchmarks.babyai.manifest import main

if __name__ == "__main__":
    sys.exit(main())
