"""Meta-World v3 as a user runs it: the experts on MT10 (one seed a task) through the whole
command, held to a plain metaworld loop, identical across K=1, K=2 and a rerun, verified
from the episode dirs; a missing renderer refused before anything runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mwruns import eval_run, evaltui, rows
from PIL import Image
from plainloop import expert_episodes

from evaltui.benchmarks.metaworld import MT10_TASKS
from evaltui.export.payload import summary_values
from evaltui.results.groups import GroupByError
from evaltui.runview.snapshot import read_snapshot
from evaltui.runview.videoframes import video_frame
from evaltui.sets.grouprows import group_table, set_group_field
from evaltui.sets.render import render
from evaltui.sets.table import MemberRow, SetTable

MT10_ONE_SEED = ("mw_expert", "--dataset", "metaworld", "--split", "MT10", "--episodes", "10")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """MT10, seed 0 of each task: K=1; K=2 with a frame at each episode's end (rendered in
    the forked workers); K=1 again with a renderer that cannot work (MUJOCO_GL=glfw and
    no display), which frames off never touches."""
    def run(name: str, *args: str, env: dict[str, str] | None = None) -> Path:
        state = {"EVALTUI_STATE_DIR": str(tmp_path_factory.mktemp(f"{name}-state"))}
        return eval_run(tmp_path_factory.mktemp(name), *MT10_ONE_SEED, *args,
                        env={**state, **(env or {})})
    no_display = {"MUJOCO_GL": "glfw", "DISPLAY": ""}
    return {"k1": run("k1", "--workers", "1"),
            "k2": run("k2", "--workers", "2", "--set", 'env.frames="end"'),
            "rerun": run("rerun", "--workers", "1", env=no_display)}


def test_rows_carry_task_and_seed_and_are_identical_across_k_and_reruns(runs) -> None:
    first = rows(runs["k1"])
    assert [(r["task"], r["seed"]) for r in first] == [(t, 0) for t in MT10_TASKS]
    assert rows(runs["k2"]) == first
    assert rows(runs["rerun"]) == first


def test_expert_success_per_task_equals_a_plain_metaworld_loop(runs) -> None:
    plain = expert_episodes((task, 0) for task in MT10_TASKS)
    ours = rows(runs["k1"])
    assert {r["task"]: r["metrics"]["success"] for r in ours} == \
        {p["task"]: float(p["success"]) for p in plain}
    for row, ref in zip(ours, plain, strict=True):
        assert row["metrics"]["return"] == ref["return"], row["task"]
        assert row["metrics"].get("steps_to_success") == (
            None if ref["steps_to_success"] is None else float(ref["steps_to_success"]))
        assert row["step_count"] == ref["steps"]


def test_metrics_are_success_steps_and_return_without_spl_or_ndtw(runs) -> None:
    summary = json.loads((runs["k1"] / "summary.json").read_text())
    assert {"success", "return", "steps_to_success"} <= set(summary["metrics"])
    assert not {"spl", "ndtw", "sdtw"} & set(summary["metrics"])
    assert summary["metrics_ci95"]["return"] is not None
    assert summary["metrics_n"]["success"] == 10


def test_frames_at_the_end_are_one_video_a_episode_rendered_in_the_workers(
        runs, tmp_path: Path) -> None:
    for ep in sorted((runs["k2"] / "episodes").iterdir()):
        assert [p.name for p in (ep / "assets").iterdir()] == ["video.mp4"], ep
        assert video_frame(ep / "assets" / "video.mp4", 0).shape == (224, 224, 3)
    gif = tmp_path / "ep.gif"
    out = evaltui("replay", str(runs["k2"] / "episodes" / "ep0003"), "--export", str(gif))
    assert out.returncode == 0, out.stderr
    with Image.open(gif) as img:
        assert img.n_frames == 1 and img.size == (448, 448)


def test_a_working_renderer_is_a_note_naming_the_backend_and_a_frames_cost(runs) -> None:
    """Frames on: the spec check's probe says what it found on eval's stderr and in
    summary.json; frames off probes nothing and says nothing."""
    said = (runs["k2"].parents[1] / "eval.stderr").read_text()
    [line] = [ln for ln in said.splitlines() if "headless rendering" in ln]
    match = re.fullmatch(r"note: headless rendering: MUJOCO_GL=(\w+) works; a 224x224 frame "
                         r"of the probe's one-geom scene took ([\d.]+) ms \(a task's scene "
                         r"costs more\)", line)
    assert match, line
    assert match.group(1) in ("osmesa", "egl") and float(match.group(2)) > 0
    summary = json.loads((runs["k2"] / "summary.json").read_text())
    assert summary["check_notes"] == [line.removeprefix("note: ")]
    assert "headless rendering" not in (runs["k1"].parents[1] / "eval.stderr").read_text()
    assert json.loads((runs["k1"] / "summary.json").read_text())["check_notes"] is None


def test_verify_recomputes_every_metric_from_the_logged_steps(runs) -> None:
    ok = evaltui("verify", str(runs["k1"]))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # One logged reward changed: the stored return no longer agrees with the log.
    log = runs["rerun"] / "episodes" / "ep0001" / "log.jsonl"
    lines = log.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"reward"' in line and '"fire"' in line)
    rec = json.loads(lines[at])
    rec["outputs"]["reward"] += 1.0
    lines[at] = json.dumps(rec)
    log.write_text("\n".join(lines) + "\n")
    bad = evaltui("verify", str(runs["rerun"]))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "return" in bad.stdout


def test_a_missing_renderer_is_one_line_and_exit_2_with_nothing_run(tmp_path: Path) -> None:
    outputs = tmp_path / "o"
    proc = evaltui("eval", "mw_expert", "--dataset", "metaworld", "--split", "reach-v3",
                   "--episodes", "1", "--set", 'env.frames="every:10"', outputs=outputs,
                   env={"MUJOCO_GL": "glfw", "DISPLAY": ""})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "MUJOCO_GL=glfw" in line and "MUJOCO_GL=egl or osmesa" in line
    assert not (outputs / "eval_runs").exists() or not any((outputs / "eval_runs").iterdir())


def test_spec_check_imports_no_simulator_or_gl_before_the_workers_fork() -> None:
    """The run process checks the spec (frames on: the renderer probe runs in a child) and
    its zygote preloads the nodeset modules, then forks the workers: neither mujoco,
    OpenGL nor metaworld may be loaded by then."""
    code = """
import json, sys
from evaltui.engine.graph.specchecks import validate_spec
from evaltui.engine.graph.specbuild import build_spec
import importlib
from evaltui.engine.executor.local.zygote import preload_modules
spec = build_spec("mw_expert", dataset="metaworld", split="MT10", episodes=2,
                  sets=['env.frames="every:10"'])
validate_spec(spec)
for module in preload_modules(spec):  # what the zygote imports before it forks workers
    importlib.import_module(module)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mujoco", "OpenGL", "metaworld"))
print(json.dumps(loaded))
"""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=root, env={**os.environ, "MUJOCO_GL": "osmesa"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_show_breaks_metaworld_down_by_task_by_default(runs) -> None:
    out = evaltui("show", str(runs["k1"]), "--format", "csv")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "task,metric,mean,ci_low,ci_high,n"
    tasks = list(dict.fromkeys(line.split(",")[0] for line in lines[1:]))
    assert tasks == [*MT10_TASKS, "all"]
    flat = evaltui("show", str(runs["k1"]), "--format", "csv", "--by", "none")
    assert flat.stdout.splitlines()[0] == "metric,mean,ci_low,ci_high,n"
    bad = evaltui("show", str(runs["k1"]), "--by", "colour")
    assert bad.returncode == 2 and "--by colour" in bad.stderr


def test_a_set_table_splits_each_member_by_task(runs) -> None:
    members = [MemberRow(key=f"k={k}", axes={"k": k}, run_id=runs[name].name, state="done",
                         run_dir=runs[name]) for k, name in ((1, "k1"), (2, "k2"))]
    table = SetTable("s", "mw", ["k"], ["success", "return"], members)
    assert set_group_field(table, None) == "task"
    grouped = group_table(table, "task", asked=False)
    assert grouped.axes == ["k", "task"]
    assert [r.axes["task"] for r in grouped.rows] == [*MT10_TASKS, "all"] * 2
    csv_text = render(grouped, "csv", metrics=["success"], digits=3)
    assert csv_text.splitlines()[0].startswith("k,task,state,run_id,success_mean")
    wide = render(grouped, "md", metrics=["success"], pivot="task", digits=3)
    assert "reach-v3" in wide.splitlines()[0]
    with pytest.raises(GroupByError, match="--by colour"):
        group_table(table, "colour", asked=True)


def test_the_report_has_the_task_table_and_plays_each_episode_video(runs, tmp_path) -> None:
    site = tmp_path / "site"
    out = evaltui("report", str(runs["k2"]), "--out", str(site))
    assert out.returncode == 0, out.stderr
    index = (site / "index.html").read_text()
    assert '<section id="by-group"><h2>By task</h2>' in index
    assert all(f'data-group="{task}"' in index for task in (*MT10_TASKS, "all"))
    page = (site / "episodes" / "ep0000.html").read_text()
    assert '<video id="episode-video"' in page and 'src="ep0000.mp4"' in page
    assert (site / "episodes" / "ep0000.mp4").read_bytes() == \
        (runs["k2"] / "episodes" / "ep0000" / "assets" / "video.mp4").read_bytes()
    assert (site / "episodes" / "ep0000.frames.png").is_file()  # decoded for the viewer


def test_exports_carry_the_metrics_by_task(runs) -> None:
    values = summary_values(read_snapshot(runs["k1"]))
    for task in MT10_TASKS:
        assert values[f"success/by_task/{task}"] == 1.0
        assert values[f"success/by_task/{task}/n"] == 1
        assert f"return/by_task/{task}" in values
    assert values["success"] == 1.0 and "success/by_task/all" not in values
