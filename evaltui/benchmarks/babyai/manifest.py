"""Build the R2R-style JSONL manifests of the BabyAI splits (DESIGN §9).

Episode ``i`` of a split is the split's env reset with ``seed=i``. One JSON object per
line, with keys ``episode_id`` (``"{split}-{i:04d}"``), ``scene_id``
(``"{env_id}:seed={i}"``), ``instruction``, ``env_id``, ``seed``, ``start`` ([x, y]),
``start_dir``, ``goals`` ([[x, y], ...], every object matching the mission),
``reference_path`` ([[x, y], ...]) and ``geodesic_distance`` (BFS moves from ``start``
to the nearest goal-adjacent cell, see :mod:`.grid`).

Reference path: the noise-free BabyAI expert bot (``minigrid.utils.baby_ai_bot``, with
done actions) is run from the reset and its cell path recorded (a position appended
whenever it changes). If the bot succeeded and its path is exactly as long, in moves,
as the BFS geodesic distance, the reference is the expert's own path -- an expert
shortest path, like the references of R2R. Otherwise (the bot explored, detoured,
failed or raised) the reference is the deterministic BFS ``grid.shortest_path``, so
every reference is a shortest path from ``start`` to a goal-adjacent cell.

Regenerate with ``scripts/make_babyai_manifests.py``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import DATA_DIR, SPLITS
from .grid import Cell, agent_cell, geodesic_distance, goal_cells, shortest_path
from .minigrid_import import BabyAIBot, make_env, quiet_stdout


def expert_path(env: Any) -> tuple[list[Cell], bool]:
    """Run the noise-free expert bot on a freshly reset env: (cell path, success)."""
    unwrapped = env.unwrapped
    bot = BabyAIBot(env)
    path: list[Cell] = [agent_cell(unwrapped)]
    while True:
        _, reward, terminated, truncated, _ = env.step(bot.replan())
        pos = agent_cell(unwrapped)
        if pos != path[-1]:
            path.append(pos)
        if terminated or truncated:
            return path, bool(terminated and reward > 0)


def make_episode(env: Any, split: str, index: int) -> tuple[dict[str, Any], str]:
    """Reset ``env`` with seed ``index`` and build its manifest record.

    Returns the record and the reference's source: ``"expert"``, ``"bfs"`` or
    ``"bfs-bot-error"``.
    """
    env_id = SPLITS[split]
    with quiet_stdout():
        env.reset(seed=index)
    unwrapped = env.unwrapped
    start: Cell = agent_cell(unwrapped)
    goals = goal_cells(unwrapped)
    record: dict[str, Any] = {
        "episode_id": f"{split}-{index:04d}",
        "scene_id": f"{env_id}:seed={index}",
        "instruction": unwrapped.mission,
        "env_id": env_id,
        "seed": index,
        "start": list(start),
        "start_dir": int(unwrapped.agent_dir),
        "max_steps": int(unwrapped.max_steps),  # BabyAI's own step limit for this level
        "goals": [list(g) for g in goals],
    }
    distance = geodesic_distance(unwrapped, start, goals)
    bfs_path = shortest_path(unwrapped, start, goals)  # before the bot changes the grid
    try:
        path, success = expert_path(env)
    except Exception:  # a bot failure only means: use the BFS reference
        path, success, source = [], False, "bfs-bot-error"
    else:
        source = "bfs"
    if success and len(path) - 1 == distance:
        reference, source = path, "expert"
    else:
        reference = bfs_path
    record["reference_path"] = [list(c) for c in reference]
    record["geodesic_distance"] = float(distance)
    return record, source


def write_split(split: str, count: int, out_dir: Path) -> dict[str, Any]:
    """Write ``out_dir/{split}.jsonl`` with ``count`` episodes; return summary stats."""
    env = make_env(SPLITS[split])
    sources: dict[str, int] = {}
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{split}.jsonl"
    try:
        with path.open("w", encoding="utf-8") as fh:
            for index in range(count):
                record, source = make_episode(env, split, index)
                sources[source] = sources.get(source, 0) + 1
                fh.write(json.dumps(record, separators=(",", ":")) + "\n")
    finally:
        env.close()
    return {"split": split, "path": str(path), "episodes": count,
            "seconds": round(time.perf_counter() - started, 2), "references": sources}


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``--split`` (repeatable; default all), ``--count`` (500), ``--out`` (a dir)."""
    parser = argparse.ArgumentParser(description="Generate the BabyAI JSONL manifests.")
    parser.add_argument("--split", action="append", choices=sorted(SPLITS),
                        help="split to generate (repeatable; default: all splits)")
    parser.add_argument("--count", type=int, default=500, help="episodes per split")
    parser.add_argument("--out", type=Path, default=DATA_DIR,
                        help="output directory (default: the package data dir)")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be >= 1")
    for split in args.split or list(SPLITS):
        print(json.dumps(write_split(split, args.count, args.out)), flush=True)
    return 0
