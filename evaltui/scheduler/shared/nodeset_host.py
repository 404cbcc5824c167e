"""``python -m evaltui.scheduler.shared.nodeset_host``: a shared nodeset hosted for the scheduler.

Unlike a run's own hosts (evaltui.engine.hosting.hostprocess), this one must outlive the
scheduler that started it: the runs using it do. So it runs in its own session, arms no
death signal and does not watch a control pipe. It reads its config as one JSON line on
stdin, authenticates clients with the per-host secret of the state dir
(``channel.host_secret``, the one a run reads for URLs in shared_urls.json), prints
``{"url", "pid"}`` (or ``{"error"}``) as one JSON line once clients can connect, and then
hosts until SIGTERM. After that line, stdout goes to the log like stderr.

It also watches its host file (:mod:`evaltui.scheduler.shared.hostfiles`) once a second: loaded
for runs, with no scheduler owning it any more and no holder's process alive, it ends by
itself, so it never outlives its last run when no scheduler comes back.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback

from evaltui.engine.hosting.channel import host_secret
from evaltui.engine.hosting.host import serve_nodeset
from evaltui.scheduler.shared.hostfiles import WATCH_INTERVAL_SEC, HolderWatch
from evaltui.scheduler.shared.launcher import hosts_dir


def main() -> int:
    config = json.loads(sys.stdin.readline())
    sys.path[:] = list(dict.fromkeys([*config.get("sys_path", []), *sys.path]))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def ready(url: str) -> None:
        print(json.dumps({"url": url, "pid": os.getpid()}), flush=True)
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the launcher stops reading now
        threading.Thread(target=watch_holders, args=(stop,), name="evaltui-host-holders",
                         daemon=True).start()

    try:
        serve_nodeset(config["impl"], config.get("params", {}), config["url"],
                      host_secret(create=True), stop=stop, on_ready=ready)
    except Exception:
        print(json.dumps({"error": traceback.format_exc()}), flush=True)
        return 1
    return 0


def watch_holders(stop: threading.Event) -> None:
    """Set ``stop`` once the host file says nobody needs this host any more."""

    watch = HolderWatch(hosts_dir())
    while not stop.wait(WATCH_INTERVAL_SEC):
        try:
            reason = watch.check()
        except OSError as exc:  # the state dir went away, say: keep hosting, try again
            print(f"evaltui host: cannot read its host file: {exc}", file=sys.stderr)
            continue
        if reason is not None:
            print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} evaltui host {os.getpid()} exits: "
                  f"{reason}", file=sys.stderr, flush=True)
            stop.set()


if __name__ == "__main__":
    sys.exit(main())
