"""evaltui.benchmarks.babyai.minigrid_import leaves networkx (minigrid's WFC envs) out.

networkx is an optional dependency of minigrid (``minigrid[wfc]``): a fresh install of
evaltui (CI's) does not have it, a user's environment may."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

CODE = """
import sys
from evaltui.benchmarks.babyai.minigrid_import import make_env
print("networkx" in sys.modules)
env = make_env("BabyAI-GoToLocal-v0")
env.reset(seed=0)
import minigrid.envs.wfc as wfc
print(wfc.WFCEnv.__doc__.startswith("Dummy class"))
"""
STILL_IMPORTABLE = """
import networkx  # whoever needs it still gets it
print(networkx.__name__)
"""


@pytest.mark.parametrize("networkx_installed", [
    pytest.param(True, marks=pytest.mark.skipif(
        importlib.util.find_spec("networkx") is None, reason="networkx is not installed")),
    False,
])
def test_babyai_imports_without_networkx(networkx_installed: bool) -> None:
    code = CODE + (STILL_IMPORTABLE if networkx_installed else "")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    expected = ["False", "True"] + (["networkx"] if networkx_installed else [])
    assert done.stdout.split() == expected
