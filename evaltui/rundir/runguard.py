"""Whether a run dir may be read at all: no symlink out of its root at the dir itself or at
the files every reader opens at its top level (DESIGN §11).

The run's status read (``rundir.read_run_status``) opens scheduler.json and summary.json
through :mod:`evaltui.rundir.safeopen` with the run dir as the root; other scheduler reads open
them by path, so the API and the TUI check a run here first and refuse it as a whole when
one of these leads out of the outputs root. Everything below the top level is opened
through :mod:`evaltui.rundir.safeopen` by the readers themselves.
"""

from __future__ import annotations

import os

from evaltui.contract.records import (
    DONE_FILENAME,
    EPISODES_DIRNAME,
    GRAPH_FILENAME,
    SCHEDULER_FILENAME,
    SHARED_URLS_FILENAME,
    SPEC_FILENAME,
    SUMMARY_FILENAME,
)
from evaltui.rundir.safeopen import LeavesRoot, dir_inside, kind_inside

TOP_LEVEL = (SCHEDULER_FILENAME, SUMMARY_FILENAME, SPEC_FILENAME, DONE_FILENAME,
             EPISODES_DIRNAME, SHARED_URLS_FILENAME, GRAPH_FILENAME)
"""What readers of a run dir open at its top level."""


def leaving(root: str | os.PathLike[str], run_name: str) -> LeavesRoot | None:
    """The first symlink out of ``root`` at ``root/run_name`` or its top level, or None
    (also when there is no such run dir: nothing to follow).

    One open and one listing of the run dir: ``GET /runs`` asks this of thousands of runs,
    and only a name that is a symlink costs a full resolution.
    """
    try:
        with dir_inside(root, run_name) as fd:
            with os.scandir(fd) as entries:  # d_type says which are symlinks: no stat each
                links = [e.name for e in entries if e.name in TOP_LEVEL and e.is_symlink()]
    except LeavesRoot as exc:
        return exc
    except OSError:
        return None  # no such run dir (or not a dir): nothing to follow
    for name in links:
        try:
            kind_inside(root, f"{run_name}/{name}")
        except LeavesRoot as exc:
            return exc
        except OSError:
            continue  # unreadable for another reason: the readers say so themselves
    return None
