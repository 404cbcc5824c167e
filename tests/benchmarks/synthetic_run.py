"""A stand-in run subprocess for the TUI benchmark: N episodes at a fixed rate.

``python synthetic_run.py RUN_DIR N RATE`` writes, like the engine does, per episode an
``ep{NNNN}/`` with a short log.jsonl and an atomic episode.json (plus ``written_at``,
the time.time() just before it lands), and keeps summary.json current through the
engine's own SummaryWriter (at most about once a second).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from evaltui.contract.states import SummaryStatus
from evaltui.engine.run.summary import SummaryWriter
from evaltui.rundir.jsonfiles import touch_done, write_json_atomic
from evaltui.rundir.layout import episode_dir


def row(index: int) -> dict[str, object]:
    success = float(index % 3 != 0)
    return {"episode_index": index, "episode_id": f"GoToLocal-{index:04d}",
            "scene_id": f"BabyAI-GoToLocal-v0:seed={index}",
            "instruction": "go to the red ball", "status": "ok" if index % 50 else "error",
            "metrics": {"success": success, "spl": success * 0.8, "ndtw": 0.7,
                        "sdtw": success * 0.7, "path_length": 5.0, "nav_error": 0.0,
                        "steps": 6.0},
            "step_count": 6, "elapsed_sec": 0.01, "error": None, "worker_id": index % 4,
            "attempts": 1, "run_id": "bench", "graph_name": "babyai-bot",
            "dataset": "babyai", "split": "GoToLocal", "worker_count": 4}


def main(run_dir: Path, count: int, rate: float) -> None:
    header = {"run_id": run_dir.name, "graph_name": "babyai-bot", "dataset": "babyai",
              "split": "GoToLocal", "worker_count": 4}
    writer = SummaryWriter(run_dir, header, count).start()
    log_line = json.dumps({"t": 0, "step": 1, "node": "policy", "event": "fire",
                           "inputs": {}, "outputs": {"action": 2}, "error": None})
    t0 = time.time()
    for index in range(count):
        delay = t0 + index / rate - time.time()
        if delay > 0:
            time.sleep(delay)
        ep = episode_dir(run_dir, index)
        (ep / "assets").mkdir(parents=True)
        (ep / "log.jsonl").write_text((log_line + "\n") * 12)
        data = row(index)
        data["written_at"] = time.time()
        write_json_atomic(ep / "episode.json", data)
        writer.add(data)
    writer.finish(SummaryStatus.DONE)
    touch_done(run_dir)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
