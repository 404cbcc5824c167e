"""Where a run's hosted nodesets listen: a private dir of Unix sockets per run."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path


class SocketDir:
    """The private dir of the run's host sockets, ``{tmp}/evaltui-{run_id}-{key}-*``.

    ``key`` hashes the run dir's path: run ids are unique only within one outputs root.
    Made only when a host is started; a run killed by SIGKILL leaves its dir behind, so
    a resumed run removes the leftovers of its own run dir first.
    """

    def __init__(self, run_dir: Path) -> None:
        key = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:10]
        self.prefix = f"evaltui-{run_dir.name}-{key}-"
        self._path: Path | None = None

    def path(self) -> Path:
        if self._path is None:
            # Unix socket paths must fit in 107 bytes: prefer a short temp dir.
            tmp = tempfile.gettempdir()
            parent = Path(tmp if len(tmp) <= 48 else "/tmp")
            for stale in parent.glob(f"{self.prefix}*"):
                shutil.rmtree(stale, ignore_errors=True)
            self._path = Path(tempfile.mkdtemp(prefix=self.prefix, dir=parent))  # 0700
        return self._path

    def remove(self) -> None:
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
