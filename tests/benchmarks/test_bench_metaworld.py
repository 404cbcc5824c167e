"""Meta-World benchmarks (issue 32): episodes/s with frames off, the whole ``evaltui eval``
command at K=1 against a plain metaworld loop over the same episodes and K=2 against K=1;
the cost a step of frames every 1, 10 steps and at the end; video bytes against PNGs.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_metaworld.py``. Numbers are printed
side by side from one run; nothing asserts a time (docs/performance.md has the numbers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("metaworld", reason="metaworld is not installed (evaltui[metaworld])")

from evaltui.benchmarks.metaworld.manifest import split_rows  # noqa: E402
from tests.metaworld.plainloop import expert_episodes  # noqa: E402

EPISODES = 20  # MT10, seeds 0 and 1 of every task


def _eval(*args: str) -> tuple[float, Path]:
    """(wall seconds of the whole command, its run dir)."""
    outputs = Path(tempfile.mkdtemp(prefix="mwbench-"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "mw_expert",
                           "--dataset", "metaworld", *args, "--outputs", str(outputs)],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "EVALTUI_STATE_DIR": str(outputs / "state")})
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = (outputs / "eval_runs").iterdir()
    return wall, run


def _plain(n: int) -> float:
    """Wall seconds of a fresh interpreter running the plain loop (imports included, as
    the command's are)."""
    code = ("import sys; sys.path.insert(0, 'tests/metaworld'); from plainloop import "
            "expert_episodes; from evaltui.benchmarks.metaworld.manifest import split_rows; "
            f"expert_episodes((r['task'], r['seed']) for r in split_rows('MT10')[:{n}])")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, timeout=900,
                   cwd=Path(__file__).resolve().parents[2])
    return time.perf_counter() - t0


@pytest.mark.bench
def test_bench_metaworld_command_vs_plain_loop_and_k2() -> None:
    pairs = [(r["task"], r["seed"]) for r in split_rows("MT10")[:EPISODES]]
    t0 = time.perf_counter()
    ref = expert_episodes(pairs)
    in_process = time.perf_counter() - t0
    steps = sum(r["steps"] for r in ref)
    plain = _plain(EPISODES)
    k1, run1 = _eval("--split", "MT10", "--episodes", str(EPISODES), "--workers", "1")
    k2, _ = _eval("--split", "MT10", "--episodes", str(EPISODES), "--workers", "2")
    elapsed1 = json.loads((run1 / "summary.json").read_text())["elapsed_sec"]
    print(f"\nMeta-World MT10 experts, {EPISODES} episodes, {steps} steps, frames off")
    print(f"  plain loop in process     {in_process:6.2f} s  {EPISODES / in_process:5.2f} ep/s"
          f"  {steps / in_process:6.0f} steps/s")
    print(f"  plain loop, fresh python  {plain:6.2f} s  {EPISODES / plain:5.2f} ep/s")
    print(f"  evaltui eval K=1          {k1:6.2f} s  {EPISODES / k1:5.2f} ep/s  "
          f"(run elapsed {elapsed1:.2f} s)")
    print(f"  evaltui eval K=2          {k2:6.2f} s  {EPISODES / k2:5.2f} ep/s")
    print(f"  ratio K=1 / plain (fresh python) {k1 / plain:.2f}; K=2 / K=1 {k2 / k1:.2f}")


@pytest.mark.bench
def test_bench_metaworld_frames_cost_and_video_bytes() -> None:
    base = ("--split", "reach-v3", "--episodes", "2", "--workers", "1")
    variants = {"off": ("--frames", "off"), "end": ("--frames", "end"),
                "every:10": ("--frames", "every:10"), "every:1": ("--frames", "every:1"),
                "every:1 png": ("--frames", "every:1", "--set", "env.video=false")}
    runs = {name: _eval(*base, *args)[1] for name, args in variants.items()}
    summaries = {m: json.loads((r / "summary.json").read_text()) for m, r in runs.items()}
    steps = sum(e["step_count"] for e in summaries["off"]["episodes"])
    busy = {m: sum(e["elapsed_sec"] for e in s["episodes"]) for m, s in summaries.items()}
    frames = {"end": 2, "every:10": 2 + steps // 10, "every:1": 2 + steps,
              "every:1 png": 2 + steps}
    print(f"\nMeta-World reach-v3, 2 episodes, {steps} steps, 224x224 corner camera, "
          f"MUJOCO_GL={os.environ.get('MUJOCO_GL', '(auto)')}; episodes {busy['off']:.2f} s "
          "with frames off")
    for mode in ("end", "every:10", "every:1", "every:1 png"):
        extra = busy[mode] - busy["off"]
        print(f"  frames {mode:11s} +{extra / steps * 1000:7.1f} ms a step, "
              f"{extra / frames[mode] * 1000:6.0f} ms a frame ({frames[mode]} frames; "
              f"episodes {busy[mode]:.2f} s)")
    video = runs["every:1"] / "episodes" / "ep0000" / "assets" / "video.mp4"
    pngs = sorted((runs["every:1 png"] / "episodes" / "ep0000" / "assets").glob("*.png"))
    png_bytes = sum(p.stat().st_size for p in pngs)
    print(f"  episode 0, {len(pngs)} frames: PNGs {png_bytes / 1024:.1f} KiB, evaltui's "
          f"video.mp4 {video.stat().st_size / 1024:.1f} KiB "
          f"({png_bytes / video.stat().st_size:.0f}x smaller)")
    pixels = [np.asarray(Image.open(p).convert("RGB")) for p in pngs]
    for codec, suffix in (("libx264", "mp4"), ("libvpx-vp9", "webm")):
        size, secs = _encode(pixels, codec, suffix)
        print(f"  the same frames as {codec} {suffix}: {size / 1024:.1f} KiB, "
              f"{secs * 1000 / len(pixels):.1f} ms a frame to encode")


def _encode(frames: list[np.ndarray], codec: str, suffix: str) -> tuple[int, float]:
    import av  # lazy: the bench's only use of PyAV

    path = Path(tempfile.mkdtemp(prefix="mwvideo-")) / f"episode.{suffix}"
    t0 = time.perf_counter()
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=30)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        for pixels in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        out.mux(stream.encode(None))
    return path.stat().st_size, time.perf_counter() - t0
