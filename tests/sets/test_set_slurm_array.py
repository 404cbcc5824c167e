"""A set as a Slurm job array, the parts that need no cluster: the ``--array`` ranges,
the set dir's manifest, the set file's Slurm fields and their refusals, and the one line
where Slurm is not installed (the cluster tests are tests/slurm/test_slurm_set_array.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evaltui.contract.setspec import SetFileError, parse_set_file
from evaltui.sets.slurmarray import (
    ArrayManifest,
    ArrayTask,
    array_range,
    array_tasks,
    member_slurm,
)


@pytest.mark.parametrize(("indices", "parallelism", "want"), [
    ([0, 1, 2, 3, 4, 5], 2, "0-5%2"), ([4, 1, 3], 2, "1,3-4%2"), ([7], 4, "7%4"),
    ([0, 2, 4, 5, 6, 9], 3, "0,2,4-6,9%3")])
def test_array_ranges(indices: list[int], parallelism: int, want: str) -> None:
    assert array_range(indices, parallelism) == want


def test_the_manifest_round_trips_and_keeps_a_members_task_id(tmp_path: Path) -> None:
    manifest = ArrayManifest({0: ArrayTask("/r/a", "12", "ka"), 2: ArrayTask("/r/c", "15", "kc")},
                             ["12", "15"])
    manifest.write(tmp_path)
    back = ArrayManifest.read(tmp_path)
    assert back == manifest and back.task_id(2) == "15_2"
    assert back.index_of("kc") == 2 and back.index_of("new") == 3
    assert ArrayManifest.read(tmp_path / "none") == ArrayManifest()


def test_an_arrays_tasks_share_one_set_of_sbatch_options() -> None:
    def spec(workers: int, episodes: int, **slurm: object) -> dict:
        return {"eval": {"worker_count": workers, "episode_count": episodes,
                         "slurm": slurm}}
    assert member_slurm([spec(1, 1, time="10"), spec(2, 1, time="10")]).time == "10"
    with pytest.raises(ValueError, match="different eval.slurm"):
        member_slurm([spec(1, 1, time="10"), spec(1, 1, time="20")])
    assert array_tasks([spec(4, 2), spec(3, 9)]) == 3  # workers a member runs at once


@pytest.mark.parametrize(("base", "message"), [
    ({"slurm": {"time": "soon"}}, "base.slurm.time: 'soon' is not a Slurm time"),
    ({"slurm": {"partitoin": "gpu"}}, "base.slurm.partitoin: Extra inputs"),
    ({"slurm-array-parallelism": 0}, "base.slurm_array_parallelism: Input should be"),
    ({"executor": "pbs"}, "base.executor: Input should be 'local', 'ray' or 'slurm'")])
def test_bad_slurm_fields_name_the_field(base: dict, message: str) -> None:
    with pytest.raises(SetFileError) as err:
        parse_set_file({"name": "s", "base": {"graph": "bot", **base}})
    assert str(err.value).startswith(message)


def test_without_slurm_set_run_says_so_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "name": "nos", "base": {"graph": "bot", "dataset": "babyai", "split": "GoToLocal",
                                "episodes": 1}, "matrix": {"policy.noise": [0.0, 0.1]}}))
    env = {**os.environ, "PATH": "/nonexistent"}  # no sbatch, no sinfo, ...
    done = subprocess.run([sys.executable, "-m", "evaltui.cli", "set",
                           "run", str(path), "--executor", "slurm", "--outputs",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    line = " ".join(done.stderr.split())
    assert line.startswith("error: base.executor: Slurm is not available here: sbatch")
    assert not (tmp_path / "out").exists()


def test_set_watch_of_a_slurm_set_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "ckpts").mkdir()
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({
        "name": "w", "base": {"graph": "bot", "dataset": "babyai", "split": "GoToLocal",
                              "episodes": 1, "executor": "slurm"},
        "matrix": {"checkpoint": {"glob": "*.npz", "watch": "ckpts"}}}))
    done = subprocess.run([sys.executable, "-m", "evaltui.cli", "set", "watch", str(path),
                           "--outputs", str(tmp_path / "out")], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert " ".join(done.stderr.split()).startswith(
        "error: base.executor: set watch does not submit Slurm job arrays")
    assert not (tmp_path / "out").exists()
