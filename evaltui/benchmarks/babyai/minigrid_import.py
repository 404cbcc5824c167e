"""The one place that imports ``minigrid`` and ``gymnasium`` (DESIGN §9).

minigrid's BabyAI verifier reads ``BABYAI_DONE_ACTIONS`` once, at import time
(``minigrid/envs/babyai/core/verifier.py``). Without it, an episode succeeds the moment
the agent faces the goal; with it, the agent must also emit ``done`` -- it has to stop
itself, as in VLN. So the variable is set here *before* the first import, and if the
verifier was already imported without it (a bare ``import minigrid`` does not load it;
``import minigrid.envs.babyai`` or a ``gym.make("BabyAI-...")`` does) we refuse to run
rather than silently scoring a different task. Everything else imports minigrid names
from here.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

os.environ["BABYAI_DONE_ACTIONS"] = "1"

import gymnasium as gym  # noqa: E402  (must follow the environment variable)

# minigrid imports its WFC envs, and they networkx: ~0.1 s of every run's start, for envs
# BabyAI does not use. Hidden during the import, networkx fails to import and minigrid
# registers the WFC ids with its own stand-in class (its fallback for a missing networkx).
# A None in sys.modules makes an import raise ImportError.
_HIDE_NETWORKX = "networkx" not in sys.modules
if _HIDE_NETWORKX:
    sys.modules["networkx"] = None  # type: ignore[assignment]
try:
    import minigrid  # noqa: E402, F401  (importing it registers the BabyAI env ids)
finally:
    if _HIDE_NETWORKX:
        del sys.modules["networkx"]
from minigrid.core.grid import Grid  # noqa: E402
from minigrid.core.world_object import WorldObj  # noqa: E402
from minigrid.envs.babyai.core import verifier as _verifier  # noqa: E402
from minigrid.utils.baby_ai_bot import BabyAIBot  # noqa: E402

if not _verifier.use_done_actions:
    raise RuntimeError(
        "minigrid's BabyAI envs were imported before evaltui.benchmarks.babyai without "
        "BABYAI_DONE_ACTIONS=1, so BabyAI episodes would succeed without the agent "
        "emitting 'done'. Set BABYAI_DONE_ACTIONS=1 in the environment, or import "
        "evaltui.benchmarks.babyai.minigrid_import before minigrid."
    )

__all__ = ["MINIGRID_VERSION", "BabyAIBot", "CapturedOutput", "Grid", "WorldObj", "make_env",
           "quiet_stdout"]

MINIGRID_VERSION: str = getattr(minigrid, "__version__", "unknown")


def make_env(env_id: str) -> Any:
    """Create the gymnasium env for a BabyAI env id (e.g. ``"BabyAI-GoToLocal-v0"``)."""
    return gym.make(env_id)


class CapturedOutput:
    """Text printed while a :func:`quiet_stdout` block ran; read ``text`` after the block."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()

    @property
    def text(self) -> str:
        """Everything captured so far."""
        return self._buffer.getvalue()


@contextlib.contextmanager
def quiet_stdout() -> Iterator[CapturedOutput]:
    """Capture what minigrid prints (e.g. ``Sampling rejected: ...``) during the block.

    minigrid's level generator prints its rejection-sampling retries to stdout; a run's
    stdout belongs to the CLI/TUI, so the text is handed back for logging instead.
    ``redirect_stdout`` swaps the process-wide ``sys.stdout``: call it from one thread
    at a time (each env replica lives in its own worker).
    """
    captured = CapturedOutput()
    with contextlib.redirect_stdout(captured._buffer):
        yield captured
