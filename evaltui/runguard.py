"""Whether a run dir may be read at all: no symlink out of its root at the dir itself or at
the files every reader opens at its top level (DESIGN §11).

The run's status read (``rundir.read_run_status``) and the scheduler open scheduler.json
and summary.json by path; the API and the TUI check a run here first and refuse it as a
whole when one of these leads out of the outputs root. Everything below the top level is
opened through :mod:`evaltui.safeopen` by the readers themselves.
"""

from __future__ import annotations

import os

from evaltui.rundir import DONE_FILENAME, EPISODES_DIRNAME, SCHEDULER_FILENAME, SUMMARY_FILENAME
from evaltui.safeopen import LeavesRoot, kind_inside

TOP_LEVEL = (SCHEDULER_FILENAME, SUMMARY_FILENAME, "spec.json", DONE_FILENAME, EPISODES_DIRNAME,
             "shared_urls.json", "graph.json")
"""What readers of a run dir open at its top level."""


def leaving(root: str | os.PathLike[str], run_name: str) -> LeavesRoot | None:
    """The first symlink out of ``root`` at ``root/run_name`` or its top level, or None
    (also when there is no such run dir: nothing to follow)."""
    for rel in (run_name, *(f"{run_name}/{name}" for name in TOP_LEVEL)):
        try:
            if kind_inside(root, rel) is None and rel == run_name:
                return None
        except LeavesRoot as exc:
            return exc
        except OSError:
            continue  # unreadable for another reason: the readers say so themselves
    return None
