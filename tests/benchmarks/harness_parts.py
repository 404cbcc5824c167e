"""Where a K=1 run's time goes beyond the plain env+bot loop, measured in parts.

``session_seconds`` runs the worker's own per-episode body (:class:`WorkerSession`) in
this process over the same episodes as the plain loop, optionally without the episode
log (a logger that records nothing) and/or without scoring (no metrics or trajectory
record): the differences are what the log contract and the results cost an episode,
with no process, pipe or start-up in between. ``first_episode_latency`` reads, from a
finished run dir, the time from the run's clock start to its first episode's first
record (the worker zygote's start-up the run could not hide, the fork, the env's
``make``).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from evaltui.contract.spec import parse_spec
from evaltui.engine.episode import loop, session
from evaltui.engine.graph.datasets import load_episodes
from evaltui.engine.graph.specchecks import check_spec
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import episode_dir

GRAPHS = Path(__file__).resolve().parents[2] / "evaltui" / "graphs"


class _NoLog:
    """An ExecutionLogger that records nothing."""

    def __init__(self, ep_dir: Path) -> None:
        self.ep_dir = ep_dir

    def record(self, *args: Any, **kwargs: Any) -> None:
        return None

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> _NoLog:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _no_score(self: Any, env: Any, episode: Any, status: Any, error: Any, logger: Any,
              step: int) -> tuple[dict[str, float], None, Any, Any]:
    return {}, None, status, error


@contextmanager
def _without(log: bool, score: bool) -> Iterator[None]:
    real_logger, real_score = session.ExecutionLogger, loop.LoopRunner._score
    try:
        if not log:
            session.ExecutionLogger = _NoLog  # type: ignore[misc, assignment]
        if not score:
            loop.LoopRunner._score = _no_score  # type: ignore[method-assign, assignment]
        yield
    finally:
        session.ExecutionLogger = real_logger  # type: ignore[misc]
        loop.LoopRunner._score = real_score  # type: ignore[method-assign]


class SessionParts:
    """One in-process WorkerSession of the bot graph (frames off) over ``split``'s first
    ``n`` episodes."""

    def __init__(self, split: str, n: int) -> None:
        graph = json.loads((GRAPHS / "bot.json").read_text())
        graph["nodesets"]["env"]["params"]["frame_stride"] = 0
        self.checked = check_spec(parse_spec({"graph": graph, "eval": {
            "split": split, "episode_count": n}}))
        self.episodes = load_episodes(self.checked.dataset_path)
        self.session = session.WorkerSession(0, self.checked, {}, threading.Event())

    def seconds(self, *, log: bool = True, score: bool = True) -> float:
        """The episodes one after another, their dirs and empty logs made beforehand (as
        the pool's recorder does)."""
        root = Path(tempfile.mkdtemp(prefix="evt-parts-"))
        indices = self.checked.episode_indices
        for i in indices:
            ep = episode_dir(root, i)
            ep.mkdir(parents=True)
            (ep / "log.jsonl").touch()
        with _without(log, score):
            t0 = time.perf_counter()
            for i in indices:
                self.session.run_episode(self.episodes[i], episode_dir(root, i))
            return time.perf_counter() - t0


def first_episode_latency(run_dir: Path) -> float:
    """Seconds from the run's clock start (summary ``started_at``) to its first record."""
    started = datetime.fromisoformat(read_json(run_dir / "summary.json")["started_at"])
    first = min(json.loads(p.read_text().splitlines()[0])["t"]
                for p in (run_dir / "episodes").glob("ep*/log.jsonl") if p.stat().st_size)
    return first - started.timestamp()
