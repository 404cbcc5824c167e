"""``evaltui serve-policy``'s place in the queue: admitted like any run, held while it serves.

The admission is ``evaltui run``'s (commands/run.py's :class:`Wrapper`: a backend found or
started on the port pool, an admit entry queued with the profile's needs, each reason it
waits said once, queued again if the backend goes away), with two differences: the entry
is of kind ``serve``, and it is held by the server's own process (there is no command to
hand it to). Once admitted, the GPU's variables are exported before the served nodeset is
built. While it serves, :meth:`ServeQueue.report` tells the entry its URL and requests
served every :data:`REPORT_EVERY_SEC` (``evaltui ls``, the API and the TUI's queue show
them); the answer says whether ``evaltui cancel admit:ID`` released the entry, which stops
the server as SIGTERM would. The entry is released when the server stops; a server killed
outright leaves a reservation whose holder is dead, which the ledger purges.
"""

from __future__ import annotations

import resource
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaltui.api.client import ApiError
from evaltui.commands.console import error
from evaltui.commands.run import EXIT_FAILED, FORWARDED, Interrupted, Wrapper
from evaltui.contract.states import AdmitState
from evaltui.scheduler.admission.calibration import NodesetPart
from evaltui.wrapper.backends import BackendStartError
from evaltui.wrapper.profiles import ResolvedProfile

REPORT_EVERY_SEC = 1.0
"""How often a serving entry reports (and so how soon a cancel stops it)."""


class ServeQueue(Wrapper):
    """One ``serve-policy``'s admit entry: queued, admitted, reported, released."""

    NAME = "evaltui serve-policy"

    def __init__(self, cmd: list[str], profile: ResolvedProfile, outputs: Path,
                 pool: list[int]) -> None:
        super().__init__(cmd, profile, outputs, pool)
        self.kind = "serve"
        self.calibration_part: tuple[Any, str, Any] | None = None
        """(Calibration, nodeset key, PolicySource): where its RAM peak is recorded."""
        self.served = False

    def admit(self) -> dict[str, str] | int:
        """Wait for admission: the variables to export (its GPU), or the exit code when it
        was not admitted (125: no backend or refused; 128+N: a signal while waiting)."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in FORWARDED}
        try:
            ram = f"; {self.ram_mb} MiB of host RAM" if self.ram_mb else ""
            self.say(f"profile {self.profile.name!r} ({self.profile.source}{ram})")
            env = dict(self._admitted().env)
            self.served = True
            return env
        except Interrupted as stop:
            self.say(f"interrupted ({signal.Signals(stop.signum).name}) while queued; left "
                     "the queue")
            self.close()
            return 128 + stop.signum
        except (ApiError, BackendStartError) as exc:
            self.close()
            return error(str(exc), EXIT_FAILED)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def report(self, served: Callable[[], tuple[str, int] | None], stop: Callable[[], None],
               done: threading.Event) -> None:
        """Until ``done``: report ``served()`` (URL, requests; None before it listens)
        every REPORT_EVERY_SEC; call ``stop()`` once the entry was released from outside.
        Run on a thread of its own (the client blocks)."""
        while True:
            now = served()
            if now is not None and self.client is not None and self.entry is not None:
                try:
                    entry = self.client.report_serving(self.entry.admit_id, *now)
                except ApiError:  # the backend is away: the reservation is still the ledger's
                    entry = None
                if entry is not None and entry.state is AdmitState.RELEASED:
                    self.say(f"{entry.admit_id} was released from outside (evaltui cancel); "
                             "stopping")
                    stop()
                    return
            if done.wait(REPORT_EVERY_SEC):
                return

    def record_ram_peak(self) -> None:
        """Once it served: its process's peak RSS, as the calibrated host RAM of the
        nodeset it served (a nodeset alone in its process, as a shared host's), so the
        next server of it, or a run of it, reserves that much."""
        if not self.served or self.calibration_part is None:
            return
        calibration, key, source = self.calibration_part
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        part = NodesetPart("served", key, source.impl, dict(source.params), "shared", 1)
        try:
            calibration.record_nodeset("ram", part, peak_mb)
        except OSError as exc:  # a full or read-only state dir: the server did its job
            self.say(f"cannot record its RAM peak: {exc.strerror or exc}")

    def close(self) -> None:
        """Release the entry (harmless twice) and let the backend go."""
        self._closing = True
        self._release()
        self.entry = None
        self._disconnect()
