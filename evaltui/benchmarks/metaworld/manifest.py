"""Write the Meta-World manifests (``data/{split}.jsonl``) from :data:`SPLITS`.

Pure data: a manifest line is ``{episode_id, scene_id, task, seed, max_steps}``, seed-major
(see the package docstring). Regenerate with ``python -m
evaltui.benchmarks.metaworld.manifest``; a test checks the shipped files equal its output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import DATA_DIR, MAX_STEPS, SPLITS


def split_rows(split: str) -> list[dict[str, Any]]:
    """The episodes of ``split``: every task with seed 0, then with seed 1, ..."""
    tasks, seeds = SPLITS[split]
    return [{"episode_id": f"{task}/s{seed}", "scene_id": task, "task": task, "seed": seed,
             "max_steps": MAX_STEPS}
            for seed in range(seeds) for task in tasks]


def manifest_text(split: str) -> str:
    return "".join(json.dumps(row) + "\n" for row in split_rows(split))


def write_manifests(out_dir: Path = DATA_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for split in SPLITS:
        path = out_dir / f"{split}.jsonl"
        path.write_text(manifest_text(split), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    print(f"wrote {len(write_manifests())} manifests to {DATA_DIR}")
