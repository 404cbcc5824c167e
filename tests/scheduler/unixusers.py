"""Two real Unix users for the shared-ledger tests (root only; skipped with one line
elsewhere): a group, two users in it, and the environment that runs this Python and this
checkout as either of them."""

from __future__ import annotations

import os
import pwd
import shutil
import site
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from schedhelpers import HERE

REPO = HERE.parents[1]


def _searchable_by_others(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _reachable(path: Path, base: Path, mounts: list[Path]) -> Path:
    """``path``, or the same tree bind-mounted under ``base`` where other users cannot
    reach it (under /root: pyenv's interpreter, a venv or checkout made by root)."""
    if _searchable_by_others(path):
        return path
    mounted = base / f"mnt{len(mounts)}"
    mounted.mkdir()
    subprocess.run(["mount", "--bind", str(path), str(mounted)], check=True)
    mounts.append(mounted)
    return mounted


def _python_for_others(base: Path, mounts: list[Path]) -> dict[str, str]:
    """The environment that runs this Python, with this venv's packages and this checkout,
    as another user: EVALTUI_TEST_PYTHON, EVALTUI_TEST_DRIVER, PYTHONPATH and (for
    libpython, which the binary looks for at its absolute build path) LD_LIBRARY_PATH.

    A venv's own ``bin/python`` links to the base interpreter and its ``pyvenv.cfg`` names
    the base's absolute path, so the base binary runs and the venv's site-packages go on
    PYTHONPATH (CI installs into a venv under a root-only checkout).
    """
    prefix = Path(sys.base_prefix).resolve()
    binary = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    seen_prefix = _reachable(prefix, base, mounts)
    repo = _reachable(REPO, base, mounts)  # whole: the helpers find tests/ above them
    here = repo / HERE.relative_to(REPO)
    paths = [repo, here]
    if sys.prefix != sys.base_prefix:
        paths += [_reachable(Path(p), base, mounts)
                  for p in site.getsitepackages() if Path(p).is_dir()]
    env = {
        "EVALTUI_TEST_PYTHON": str(seen_prefix / binary.relative_to(prefix)),
        "EVALTUI_TEST_DRIVER": str(here / "sched_driver.py"),
        "PYTHONPATH": os.pathsep.join(map(str, paths)),
    }
    if seen_prefix != prefix:
        env["LD_LIBRARY_PATH"] = str(seen_prefix / "lib")
    return env


@pytest.fixture
def two_users() -> Iterator[tuple[Path, str, list[str], dict[str, str]]]:
    """(a 0755 base dir, the group, two user names, the env that runs this Python)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to create two Unix users (shared-ledger test)")
    tag = f"{os.getpid() % 100000}"
    group, users = f"evtg{tag}", [f"evta{tag}", f"evtb{tag}"]
    base = Path(tempfile.mkdtemp(prefix="evaltui-users-", dir="/tmp"))
    os.chmod(base, 0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    made: list[list[str]] = []
    mounts: list[Path] = []
    try:
        env.update(_python_for_others(base, mounts))
        for cmd in (
            ["groupadd", group],
            *(["useradd", "-M", "-N", "-g", group, "-s", "/bin/sh", u] for u in users),
        ):
            subprocess.run(cmd, check=True, capture_output=True)
            made.append(cmd)
        yield base, group, users, env
    finally:
        for cmd in reversed(made):
            undo = ["groupdel", cmd[-1]] if cmd[0] == "groupadd" else ["userdel", cmd[-1]]
            subprocess.run(undo, check=False, capture_output=True)
        for mounted in reversed(mounts):
            subprocess.run(["umount", "-l", str(mounted)], check=False)
        if not any(os.path.ismount(m) for m in mounts):  # never delete through a mount
            shutil.rmtree(base, ignore_errors=True)


def start_driver(base: Path, user: str, group: str, env: dict[str, str], ledger_dir: Path,
                 args: list[str], **extra_env: str) -> subprocess.Popen[bytes]:
    """Run ``sched_driver.py ARGS`` as ``user`` with a home, state dir and outputs of its
    own under ``base`` and the shared ledger ``ledger_dir``, on one fake 24 GiB GPU."""
    home = base / user
    for sub in ("state", "outputs"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    entry = pwd.getpwnam(user)
    for path in (home, home / "state", home / "outputs"):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    user_env = {
        **env,
        "HOME": str(home),
        "EVALTUI_STATE_DIR": str(home / "state"),
        "EVALTUI_OUTPUTS": str(home / "outputs"),
        "EVALTUI_LEDGER_DIR": str(ledger_dir),
        "EVALTUI_FAKE_GPUS": "1x24576",
        **extra_env,
    }
    return subprocess.Popen([env["EVALTUI_TEST_PYTHON"], env["EVALTUI_TEST_DRIVER"], *args],
                            env=user_env, user=user, group=group, extra_groups=[],
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=str(home))
