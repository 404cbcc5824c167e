"""Watching the run's nodeset hosts from an executor's wait (the local pool's and the Slurm
executor's: both host the shared nodesets in the run process). A dead host is restarted
at its URL, unless ``host_lost`` says it was a replica the run goes on without
(engine/run/replicas.py): then it is dropped from the watch."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from evaltui.engine.executor.errors import NodesetBuildError
from evaltui.engine.hosting.hostprocess import HostProcess

HostLost = Callable[[HostProcess, str], bool]
"""Asked first when a host dies: True means it is a lost replica, not restarted."""


def host_conns(hosts: Sequence[HostProcess]) -> dict[Any, HostProcess]:
    """The live hosts by their pipe, to wait on beside the workers (readable: it died)."""
    return {h.child.conn: h for h in hosts if h.child}


def check_host(hosts: list[HostProcess], host: HostProcess,
               host_lost: HostLost | None) -> None:
    """``host``'s pipe was readable: if it died, drop it (a lost replica, out of ``hosts``)
    or restart it; NodesetBuildError when it cannot be restarted."""
    if not host.died():
        return
    assert host.child is not None
    how = host.child.describe_exit()
    if host_lost is not None and host_lost(host, how):
        hosts.remove(host)  # its callers moved to the other replicas
        return
    print(f"evaltui: host of shared nodeset {host.name!r} died ({how}); restarting it",
          file=sys.stderr, flush=True)
    try:
        host.restart()
    except Exception as exc:
        raise NodesetBuildError(f"the host of shared nodeset {host.name!r} died ({how}) "
                                f"and could not be restarted: {exc}") from exc
