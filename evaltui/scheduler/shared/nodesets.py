"""Shared nodesets hosted by the scheduler for the runs that use them, refcounted per run.

A run whose graph has a ``parallelism = "shared"`` nodeset (a policy model, say) gets it
from the scheduler: the first run that needs it makes the scheduler start a host process
through a :class:`NodesetLauncher`, later runs with the same impl and params reuse it (so
its memory counts ~0 in their estimate), and its URL goes into the run's
shared_urls.json. Each run holds one reference until it ends. A nodeset the scheduler
loaded is stopped on the tick after its count reaches zero; one loaded interactively
(``load``) stays until ``unload``.

Host processes run in their own session, so killing the scheduler does not take them
(or the runs using them) down. Each host has a file in ``hosts_dir``
(:mod:`evaltui.scheduler.shared.hostfiles`) naming its owner and holders: a restarted scheduler
adopts the hosts whose owner is gone, and a host loaded for runs ends by itself once no
scheduler owns it and its last holder's process has ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from evaltui.contract.pidref import PidRef
from evaltui.scheduler import procs
from evaltui.scheduler.admission.calibration import NodesetPart, nodeset_key
from evaltui.scheduler.shared import hostfiles

Origin = Literal["scheduler", "interactive"]


@dataclass(frozen=True)
class HostedProcess:
    """A running nodeset host: where to reach it and which process it is."""

    url: str
    ref: PidRef


class NodesetLauncher(Protocol):
    """Starts and stops nodeset host processes (in their own session)."""

    def start(self, name: str, impl: str, params: Mapping[str, Any],
              env: Mapping[str, str]) -> HostedProcess:
        """Start hosting; returns once the URL accepts connections. Raises on failure."""
        ...

    def stop(self, hosted: HostedProcess) -> None:
        """Stop the host (SIGTERM, then SIGKILL after a grace period)."""
        ...


@dataclass
class SharedNodeset:
    """One hosted nodeset and who uses it."""

    name: str
    key: str
    impl: str
    params: dict[str, Any]
    hosted: HostedProcess
    origin: Origin
    gpu: int | None = None
    holders: set[str] = field(default_factory=set)
    loaded_at: float = field(default_factory=time.time)
    zero_since_tick: int | None = None
    """The tick counter when the refcount last reached zero (None while referenced)."""

    @property
    def refcount(self) -> int:
        return len(self.holders)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "impl": self.impl, "params": self.params,
                "url": self.hosted.url, "pid": self.hosted.ref.pid,
                "pid_create_time": self.hosted.ref.create_time, "origin": self.origin,
                "gpu": self.gpu, "holders": sorted(self.holders), "loaded_at": self.loaded_at}


class NodesetError(RuntimeError):
    """A shared nodeset could not be loaded or unloaded."""


class SharedNodesets:
    """The registry of hosted nodesets (thread-safe), one host file each in ``hosts_dir``."""

    def __init__(self, launcher: NodesetLauncher | None, hosts_dir: Path,
                 on_change: Callable[[SharedNodeset, bool], None] | None = None, *,
                 runs_root: Path | None = None, owner: PidRef | None = None) -> None:
        self.launcher = launcher
        self.hosts_dir = Path(hosts_dir)
        self.runs_root = str(runs_root) if runs_root is not None else None
        """Where the holders' run dirs are (their scheduler.json has their PIDs)."""
        self.owner = owner or PidRef.current()
        self._disowned = False
        self._written: dict[str, dict[str, Any]] = {}
        """What each host's file last said (key -> data): unchanged files are not rewritten."""
        self._on_change = on_change
        self._by_key: dict[str, SharedNodeset] = {}
        self._lock = threading.RLock()
        self._persist_lock = threading.Lock()
        self._starting: dict[str, threading.Event] = {}
        self.version = 0
        """Bumped when the set of loaded nodesets changes (estimates depend on it)."""

    @property
    def enabled(self) -> bool:
        """False without a launcher: shared nodesets then stay inside each run."""
        return self.launcher is not None

    # ---- reads ---------------------------------------------------------------------------
    def loaded_keys(self) -> set[str]:
        with self._lock:
            return set(self._by_key)

    def all(self) -> list[SharedNodeset]:
        with self._lock:
            return sorted(self._by_key.values(), key=lambda n: n.name)

    def get(self, name: str) -> SharedNodeset | None:
        with self._lock:
            return next((n for n in self._by_key.values() if n.name == name), None)

    # ---- runs ----------------------------------------------------------------------------
    def acquire(self, run_id: str, part: NodesetPart, env: Mapping[str, str],
                gpu: int | None) -> SharedNodeset:
        """A reference for ``run_id`` on ``part``, loading it (origin scheduler) if needed.

        Loading blocks the caller (a scheduler loader thread), never the registry: reads
        and other nodesets go on meanwhile, and a second caller of the same nodeset waits
        for the first one's load instead of starting another host.
        """
        ns = self._ensure(part.name, part.key, part.impl, part.params, env, "scheduler", gpu)
        with self._lock:
            ns.holders.add(run_id)
            ns.zero_since_tick = None
        self._changed(ns, True)
        return ns

    def release(self, run_id: str, tick_no: int) -> list[SharedNodeset]:
        """Drop every reference ``run_id`` holds; returns the nodesets now unreferenced."""
        touched, dropped = [], []
        with self._lock:
            for ns in self._by_key.values():
                if run_id in ns.holders:
                    ns.holders.discard(run_id)
                    touched.append(ns)
                    if not ns.holders:
                        ns.zero_since_tick = tick_no
                        dropped.append(ns)
        for ns in touched:
            self._changed(ns, True)
        return dropped

    def tick(self, tick_no: int) -> list[SharedNodeset]:
        """Stop scheduler-loaded nodesets unreferenced since an earlier tick (or dead)."""
        with self._lock:
            stopped = [
                ns for ns in self._by_key.values()
                if not procs.alive(ns.hosted.ref.pid, ns.hosted.ref.create_time)
                or (ns.origin == "scheduler" and not ns.holders
                    and ns.zero_since_tick is not None and tick_no > ns.zero_since_tick)
            ]
        for ns in stopped:
            self._stop(ns)
        return stopped

    def stop_unheld(self) -> list[SharedNodeset]:
        """Stop every scheduler-loaded nodeset that no run holds (the scheduler is going away).

        Nodesets that runs still hold stay up for those runs (a next scheduler adopts
        them, or they end with their last run); interactive ones always stay.
        """
        with self._lock:
            idle = [ns for ns in self._by_key.values()
                    if ns.origin == "scheduler" and not ns.holders]
        for ns in idle:
            self._stop(ns)
        self._disowned = True  # the hosts left watch their holders alone now
        self._persist()
        return idle

    # ---- interactive ---------------------------------------------------------------------
    def load(self, name: str, impl: str, params: Mapping[str, Any], env: Mapping[str, str],
             gpu: int | None = None) -> SharedNodeset:
        """Load (or pin, if the scheduler already hosts it) a nodeset that stays loaded."""
        params = dict(params)
        ns = self._ensure(name, nodeset_key(impl, params), impl, params, env, "interactive", gpu)
        with self._lock:
            ns.origin = "interactive"
        self._changed(ns, True)
        return ns

    def unload(self, name: str, *, force: bool = False) -> SharedNodeset:
        """Stop a nodeset by name; refuses while runs hold it unless ``force``."""
        with self._lock:
            ns = self.get(name)
            if ns is None:
                raise NodesetError(f"no shared nodeset named {name!r} is loaded")
            if ns.holders and not force:
                raise NodesetError(f"nodeset {name!r} is in use by {len(ns.holders)} run(s): "
                                   f"{', '.join(sorted(ns.holders))}")
        self._stop(ns)
        return ns

    # ---- restart -------------------------------------------------------------------------
    def restore(self) -> list[SharedNodeset]:
        """Adopt the live hosts of this runs root whose owner is gone (their files name
        them); holders are re-added later (:meth:`hold`)."""
        adopted = []
        for _path, item in hostfiles.adoptable(self.hosts_dir, self.runs_root, self.owner):
            try:
                ref = PidRef(int(item["pid"]), float(item["pid_create_time"]))
                ns = SharedNodeset(str(item["name"]), str(item["key"]), str(item["impl"]),
                                   dict(item["params"]), HostedProcess(str(item["url"]), ref),
                                   item["origin"], item.get("gpu"),
                                   loaded_at=float(item.get("loaded_at", time.time())))
            except (KeyError, TypeError, ValueError):
                continue
            with self._lock:
                if ns.key in self._by_key:
                    continue
                self._by_key[ns.key] = ns
                self._written[ns.key] = item
                self.version += 1
            adopted.append(ns)
        return adopted

    def hold(self, run_id: str, url: str) -> bool:
        """Re-add the reference of an adopted run to the nodeset serving ``url``."""
        with self._lock:
            held = next((ns for ns in self._by_key.values() if ns.hosted.url == url), None)
            if held is not None:
                held.holders.add(run_id)
                held.zero_since_tick = None
        if held is not None:
            self._persist()  # the host must know its holders if this scheduler goes too
        return held is not None

    def expire_unheld(self, tick_no: int) -> None:
        """After a restore: scheduler-loaded nodesets no adopted run holds go at the next tick."""
        with self._lock:
            for ns in self._by_key.values():
                if ns.origin == "scheduler" and not ns.holders and ns.zero_since_tick is None:
                    ns.zero_since_tick = tick_no

    # ---- internals -----------------------------------------------------------------------
    def _ensure(self, name: str, key: str, impl: str, params: dict[str, Any],
                env: Mapping[str, str], origin: Origin, gpu: int | None) -> SharedNodeset:
        """The hosted nodeset of ``key``, started here (outside the lock) if needed."""
        while True:
            with self._lock:
                ns = self._by_key.get(key)
                if ns is not None:
                    return ns
                starting = self._starting.get(key)
                if starting is None:
                    self._starting[key] = threading.Event()
                    if any(n.name == name for n in self._by_key.values()):
                        name = f"{name}-{key[:6]}"  # the same name with other impl/params
                    break
            starting.wait()  # someone else is loading it: use theirs (or retry if it failed)
        if self.launcher is None:
            raise NodesetError("shared nodesets cannot be hosted: no nodeset launcher")
        try:
            hosted = self.launcher.start(name, impl, params, env)
        except BaseException:
            with self._lock:
                self._starting.pop(key).set()
            raise
        ns = SharedNodeset(name, key, impl, params, hosted, origin, gpu)
        with self._lock:
            self._by_key[key] = ns
            self.version += 1
            self._starting.pop(key).set()
        return ns

    def _stop(self, ns: SharedNodeset) -> None:
        with self._lock:
            if self._by_key.get(ns.key) is not ns:
                return  # stopped already
            del self._by_key[ns.key]
            self.version += 1
        with self._persist_lock:
            self._written.pop(ns.key, None)
            hostfiles.remove(hostfiles.host_file(self.hosts_dir, ns.hosted.ref.pid))
        if self.launcher is not None:
            self.launcher.stop(ns.hosted)
        self._changed(ns, False)

    def _changed(self, ns: SharedNodeset, loaded: bool) -> None:
        self._persist()
        if self._on_change is not None:
            self._on_change(ns, loaded)

    def _persist(self) -> None:
        """Bring every host's file up to date (only the ones that changed are written)."""
        with self._persist_lock:  # snapshot and write under one lock: the newest lands last
            with self._lock:
                owner = hostfiles.owner_json(None if self._disowned else self.owner)
                wanted = {n.key: (n.hosted.ref.pid,
                                  {**n.to_json(), "runs_root": self.runs_root, "owner": owner})
                          for n in self._by_key.values()}
            for key, (pid, data) in wanted.items():
                if self._written.get(key) == data:
                    continue
                path = hostfiles.host_file(self.hosts_dir, pid)
                if hostfiles.write(path, data, create=key not in self._written):
                    self._written[key] = data
