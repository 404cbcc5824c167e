"""safeopen: reads under a root never follow a symlink out of it; symlinks inside are fine."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from evaltui.rundir.safeopen import (
    LeavesRoot,
    NotRegularFile,
    check_inside,
    kind_inside,
    list_dir_inside,
    open_fd,
    read_bytes_inside,
    read_json_inside,
    within,
)

SECRET = b"outside-the-root"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/run/{spec.json, episodes/ep0000/log.jsonl}, and a secret next to root."""
    (tmp_path / "secret.txt").write_bytes(SECRET)
    (tmp_path / "secretdir").mkdir()
    (tmp_path / "secretdir" / "log.jsonl").write_bytes(SECRET)
    run = tmp_path / "root" / "run"
    (run / "episodes" / "ep0000").mkdir(parents=True)
    (run / "spec.json").write_text('{"a": 1}')
    (run / "episodes" / "ep0000" / "log.jsonl").write_bytes(b"{}\n")
    return tmp_path / "root"


def test_plain_reads(tree: Path) -> None:
    assert read_json_inside(tree, "run/spec.json") == {"a": 1}
    assert read_bytes_inside(tree, tree / "run/episodes/ep0000/log.jsonl") == b"{}\n"
    assert kind_inside(tree, "run") == "dir" and kind_inside(tree, "run/spec.json") == "file"
    assert kind_inside(tree, "run/missing") is None and kind_inside(tree, "run/spec.json/x") is None
    assert sorted(list_dir_inside(tree, "run")) == ["episodes", "spec.json"]
    assert within(tree, tree / "run" / "spec.json") == Path("run/spec.json")


@pytest.mark.parametrize("plant", [
    "run/spec.json",                      # a file
    "run/episodes/ep0000/log.jsonl",      # a file deeper down
    "run/episodes/ep0000",                # a whole ep dir (to the secret dir)
    "run",                                # the run dir itself
])
def test_a_symlink_that_leaves_is_refused(tree: Path, plant: str) -> None:
    target = tree.parent / ("secretdir" if plant in ("run", "run/episodes/ep0000")
                            else "secret.txt")
    path = tree / plant
    if path.is_dir():
        os.rename(path, str(path) + ".moved")
    else:
        path.unlink()
    path.symlink_to(target)
    rel = plant if plant.endswith(".jsonl") or plant.endswith(".json") else plant + "/log.jsonl"
    with pytest.raises(LeavesRoot) as caught:
        read_bytes_inside(tree, rel)
    assert isinstance(caught.value, PermissionError)
    with pytest.raises(LeavesRoot):
        check_inside(tree, plant)
    with pytest.raises(LeavesRoot):
        kind_inside(tree, plant)


def test_dotdot_and_absolute_paths_elsewhere_are_refused(tree: Path) -> None:
    for rel in ("../secret.txt", "run/../../secret.txt", str(tree.parent / "secret.txt")):
        with pytest.raises(LeavesRoot):
            read_bytes_inside(tree, rel)
    assert read_json_inside(tree, "run/episodes/../spec.json") == {"a": 1}


def test_a_symlink_that_stays_inside_is_followed(tree: Path) -> None:
    (tree / "run" / "alias.json").symlink_to("spec.json")
    (tree / "run" / "eps").symlink_to(tree / "run" / "episodes")
    assert read_json_inside(tree, "run/alias.json") == {"a": 1}
    assert read_bytes_inside(tree, "run/eps/ep0000/log.jsonl") == b"{}\n"
    # A dangling symlink that points out still counts as leaving.
    (tree / "run" / "dangling").symlink_to(tree.parent / "nowhere")
    with pytest.raises(LeavesRoot):
        check_inside(tree, "run/dangling")


def test_the_root_itself_may_be_a_symlink(tree: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias-root"
    alias.symlink_to(tree)
    assert read_json_inside(alias, "run/spec.json") == {"a": 1}
    assert read_json_inside(alias, alias / "run" / "spec.json") == {"a": 1}


def test_a_fifo_does_not_hang_and_is_not_a_file(tree: Path) -> None:
    os.mkfifo(tree / "run" / "fifo")
    done = threading.Event()

    def read() -> None:
        with pytest.raises(NotRegularFile):
            read_bytes_inside(tree, "run/fifo")
        done.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    assert done.wait(5), "reading a FIFO blocked"
    with pytest.raises(IsADirectoryError):
        read_bytes_inside(tree, "run")


def test_a_symlink_swapped_in_after_the_check_is_refused(tree: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The race: resolved while an inside symlink is there, then swapped for an outside one."""
    link = tree / "run" / "link.json"
    link.symlink_to("spec.json")
    real = os.path.realpath

    def swap(path: str) -> str:
        answer = real(path)
        if path.endswith("link.json"):
            link.unlink()
            link.symlink_to(tree.parent / "secret.txt")
            # The answer names spec.json; make the walk meet the new symlink instead.
            return str(tree / "run" / "link.json")
        return answer

    monkeypatch.setattr(os.path, "realpath", swap)
    with pytest.raises(LeavesRoot):
        open_fd(tree, "run/link.json")
