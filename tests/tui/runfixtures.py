"""Deterministic run dirs for the TUI tests: every run state, fixed times, fixed frames.

Everything is written directly with ``write_json_atomic`` (no engine run), so snapshots
do not depend on timing. "Live" runs point their scheduler.json at a real sleeping
process in its own session, so a status read finds them running.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from evaltui.contract.pidref import PidRef
from evaltui.engine.episode.metrics import aggregate
from evaltui.graphs import builtin_graph_path
from evaltui.rundir.jsonfiles import touch_done, write_json_atomic
from evaltui.rundir.layout import episode_dir, runs_root

T0 = datetime(2026, 1, 15, 9, 0, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=30)
"""The clock the app is given in tests."""
INSTRUCTIONS = ["go to the red ball", "go to a blue key", "go to the grey box",
                "go to the green door", "go to a purple ball"]


def iso(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat(timespec="milliseconds")


def bot_spec(split: str = "GoToLocal", episodes: int = 20, **scheduling: Any) -> dict[str, Any]:
    graph_path = builtin_graph_path("bot")
    assert graph_path is not None
    return {"graph": json.loads(graph_path.read_text()),
            "eval": {"dataset": "babyai", "split": split, "episode_count": episodes,
                     "worker_count": 2},
            "scheduling": {"marginal_vram_mb": 0, "exclusive_gpu": False, "priority": 0,
                           "tie_to_backend": False, **scheduling}}


def frame_png(path: Path, seed: int) -> None:
    """A 16x16 frame: a dark grid, a red agent cell moving with ``seed``, a green goal."""
    img = np.full((16, 16, 3), 40, dtype=np.uint8)
    img[::4, :, :] = 90
    img[:, ::4, :] = 90
    img[12:15, 12:15] = (40, 200, 60)
    x = 1 + (seed * 3) % 12
    img[6:9, x:x + 3] = (220, 40, 40)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path)


def log_records(index: int, steps: int, error_step: int | None) -> list[dict[str, Any]]:
    """episode_start, then per step a policy and an env_step firing, then episode_end."""
    t = 1768467600.0 + index
    recs: list[dict[str, Any]] = [{
        "t": t, "step": 0, "node": None, "nodeset": "env", "event": "episode_start",
        "dur_ms": 12.5, "inputs": {"episode_id": f"GoToLocal-{index:04d}"},
        "outputs": {"obs": {"image": {"$array": {"shape": [7, 7, 3], "dtype": "uint8",
                                                 "min": 0, "max": 7}},
                            "direction": 0, "mission": INSTRUCTIONS[index % 5]},
                    "frame": {"$frame": "assets/step00000_episode_start_00001.png",
                              "shape": [16, 16, 3]}},
        "error": None}]
    for step in range(1, steps + 1):
        action = (index + step) % 3
        recs.append({"t": t + step * 0.01, "step": step, "node": "policy",
                     "nodeset": "policy", "event": "fire", "dur_ms": 0.5,
                     "inputs": {"sim": {"$object": "minigrid.envs.babyai.goto.GoToLocal"}},
                     "outputs": {"action": action}, "error": None})
        if step == error_step:
            recs.append({"t": t + step * 0.01 + 0.005, "step": step, "node": "env_step",
                         "nodeset": "env", "event": "error", "dur_ms": 0.7,
                         "inputs": {"action": action}, "outputs": None,
                         "error": "ValueError: agent walked into a wall"})
            break
        recs.append({"t": t + step * 0.01 + 0.005, "step": step, "node": "env_step",
                     "nodeset": "env", "event": "fire", "dur_ms": 0.9,
                     "inputs": {"action": action},
                     "outputs": {"frame": {"$frame": f"assets/step{step:05d}_env_step_"
                                                     f"{step + 1:05d}.png",
                                           "shape": [16, 16, 3]},
                                 "done": step == steps, "reward": 0.9 if step == steps else 0.0},
                     "error": None})
    last = recs[-1]["step"]
    recs.append({"t": t + 1, "step": last, "node": None, "nodeset": None,
                 "event": "episode_end", "dur_ms": 40.0, "inputs": None,
                 "outputs": {"status": "error" if error_step else "ok", "step_count": last},
                 "error": None})
    return recs


def episode_row(run_id: str, index: int, *, status: str = "ok", steps: int = 4,
                worker: int = 0, graph: str = "babyai-bot") -> dict[str, Any]:
    success = 0.0 if status != "ok" or index % 4 == 3 else 1.0
    metrics = {} if status == "error" else {
        "success": success, "spl": round(success * (0.6 + 0.1 * (index % 4)), 4),
        "ndtw": round(0.5 + 0.05 * (index % 10), 4), "sdtw": round(success * 0.7, 4),
        "path_length": float(steps), "nav_error": 0.0 if success else 2.0,
        "steps": float(steps)}
    return {"episode_index": index, "episode_id": f"GoToLocal-{index:04d}",
            "scene_id": f"BabyAI-GoToLocal-v0:seed={index}",
            "instruction": INSTRUCTIONS[index % 5], "metrics": metrics, "step_count": steps,
            "elapsed_sec": round(0.02 + 0.001 * index, 4), "status": status,
            "error": "ValueError: agent walked into a wall" if status == "error" else
            ("step 3 took 0.200 s, over per_step_budget_sec 0.1" if status == "timeout"
             else None),
            "worker_id": worker, "attempts": 1, "finished_at": iso(1 + index * 0.1),
            "run_id": run_id, "graph_name": graph, "dataset": "babyai", "split": "GoToLocal",
            "worker_count": 2,
            "nodes": [{"name": "policy", "nodeset": "policy", "op": "act", "inputs": ["sim"],
                       "outputs": ["action"]},
                      {"name": "env_step", "nodeset": "env", "op": "step", "inputs": ["action"],
                       "outputs": ["frame", "done", "reward"]}]}


def status_for(index: int) -> str:
    return {5: "error", 9: "timeout"}.get(index, "ok")


def write_episode(run_dir: Path, index: int, *, status: str | None = None,
                  steps: int = 4) -> dict[str, Any]:
    """A whole ep dir (log, frames, episode.json); returns its row."""
    status = status or status_for(index)
    ep = episode_dir(run_dir, index)
    (ep / "assets").mkdir(parents=True, exist_ok=True)
    records = log_records(index, steps, 2 if status == "error" else None)
    with open(ep / "log.jsonl", "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    frame_png(ep / "assets" / "step00000_episode_start_00001.png", 0)
    for step in range(1, steps + 1):
        frame_png(ep / "assets" / f"step{step:05d}_env_step_{step + 1:05d}.png", step)
    row = episode_row(run_dir.name, index, status=status, steps=records[-1]["step"],
                      worker=index % 2)
    write_json_atomic(ep / "episode.json", row)
    return row


def write_summary(run_dir: Path, rows: list[dict[str, Any]], *, status: str, total: int,
                  error: str | None = None, elapsed: float = 60.0,
                  started: float = 0.0) -> None:
    agg = aggregate(rows)  # errors count as failures, as the SummaryWriter does
    means = {n: round(v, 4) for n, v in agg.means.items()}
    ci = {n: [round(v - 0.1, 4), round(v + 0.1, 4)] for n, v in means.items()}
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    write_json_atomic(run_dir / "summary.json", {
        "run_id": run_dir.name, "graph_name": "babyai-bot", "dataset": "babyai",
        "split": "GoToLocal", "worker_count": 2, "status": status, "error": error,
        "episodes_total": total, "episodes_finished": len(rows), "counts_by_status": counts,
        "metrics": means, "metrics_ci95": ci, "metrics_n": agg.n,
        "error_count": sum(r["status"] in ("error", "timeout") for r in rows),
        "started_at": iso(started),
        "updated_at": iso(started + 1),
        "finished_at": None if status == "running" else iso(1), "elapsed_sec": elapsed,
        "episodes": rows})


def write_record(run_dir: Path, **fields: Any) -> None:
    record = {"state": "queued", "priority": 0, "queued_at": iso(0), "admitted_at": None,
              "pid": None, "pid_create_time": None, "reservation": None,
              "cancel_requested_at": None, "exit_code": None, "estimate_mb": 2048,
              "ram_estimate_mb": 1024, "estimate_source": "declared",
              "measured_peak_mb": None}
    record.update(fields)
    write_json_atomic(run_dir / "scheduler.json", record)


def new_run(outputs: Path, run_id: str, **spec_overrides: Any) -> Path:
    run_dir = runs_root(outputs) / run_id
    run_dir.mkdir(parents=True)
    write_json_atomic(run_dir / "spec.json", bot_spec(**spec_overrides))
    write_json_atomic(run_dir / "shared_urls.json", {})
    return run_dir


def build_runs(outputs: Path, live: list[PidRef]) -> dict[str, Path]:
    """One run per state (and one with a corrupt summary.json), keyed by a short name."""
    runs: dict[str, Path] = {}

    def finished(name: str, run_id: str, status: str, count: int, **record: Any) -> Path:
        run_dir = new_run(outputs, run_id)
        rows = [write_episode(run_dir, i) for i in range(count)]
        write_summary(run_dir, rows, status=status, total=20,
                      error="graph could not load: no module named 'mypolicy'"
                      if status == "failed" else None)
        write_record(run_dir, state=status, admitted_at=iso(1), pid=4_000_000,
                     pid_create_time=1.0, **record)
        touch_done(run_dir)
        runs[name] = run_dir
        return run_dir

    finished("done", "20260115_090100", "done", 20, exit_code=0, measured_peak_mb=1536)
    finished("failed", "20260115_090200", "failed", 0, exit_code=1)
    finished("cancelled", "20260115_090300", "cancelled", 6, exit_code=143,
             cancel_requested_at=iso(4))

    aborted = new_run(outputs, "20260115_090400")
    rows = [write_episode(aborted, i) for i in range(3)]
    write_summary(aborted, rows, status="running", total=20)
    write_record(aborted, state="running", pid=4_000_000, pid_create_time=1.0)
    runs["aborted"] = aborted

    running = new_run(outputs, "20260115_090500", episodes=40)
    rows = [write_episode(running, i) for i in range(12)]
    write_summary(running, rows, status="running", total=40, elapsed=20.0, started=29)
    write_record(running, state="running", admitted_at=iso(5), pid=live[0].pid,
                 pid_create_time=live[0].create_time, priority=1,
                 reservation={"gpu": 0, "mb": 4096, "ram_mb": 2048})
    runs["running"] = running

    starting = new_run(outputs, "20260115_090600")
    write_record(starting, state="starting", queued_at=iso(6), admitted_at=iso(6),
                 pid=live[1].pid, pid_create_time=live[1].create_time,
                 reservation={"gpu": 1, "mb": 1024, "ram_mb": 1024})
    runs["starting"] = starting

    corrupt = new_run(outputs, "20260115_090700")
    (corrupt / "summary.json").write_text('{"run_id": "20260115_090700", "status": ')
    write_record(corrupt, state="running", pid=4_000_000, pid_create_time=1.0)
    runs["corrupt"] = corrupt

    for name, run_id, priority, minutes, vram in (("queued", "20260115_090800", 5, 8, 30720),
                                                  ("queued_low", "20260115_090900", 0, 9,
                                                   2048)):
        queued = new_run(outputs, run_id, marginal_vram_mb=vram, priority=priority)
        write_record(queued, priority=priority, queued_at=iso(minutes), estimate_mb=vram,
                     waiting_reason=f"needs {vram / 1024:.1f} GiB on GPU0, 14.0 GiB free "
                     "after reservations", waiting_kind="gpu_memory")
        runs[name] = queued
    return runs


LIVE_RUNS = ("running", "starting")
"""Fixture runs whose scheduler.json points at a live process."""


def relive(runs: dict[str, Path], live: list[PidRef]) -> None:
    """Point the live runs of a copied fixture tree at this test's processes."""
    for name, ref in zip(LIVE_RUNS, live, strict=True):
        path = runs[name] / "scheduler.json"
        record = json.loads(path.read_text())
        record.update(pid=ref.pid, pid_create_time=ref.create_time)
        write_json_atomic(path, record)
