"""evaltui.benchmarks.babyai.minigrid_import leaves networkx (minigrid's WFC envs) out."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from evaltui.benchmarks.babyai.minigrid_import import make_env
print("networkx" in sys.modules)
env = make_env("BabyAI-GoToLocal-v0")
env.reset(seed=0)
import networkx  # still importable by whoever needs it
import minigrid.envs.wfc as wfc
print(wfc.WFCEnv.__doc__.startswith("Dummy class"))
"""


def test_babyai_imports_without_networkx_which_stays_importable() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
