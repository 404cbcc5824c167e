"""Queued runs whose nodesets' own Python environments are not built yet (DESIGN §13).

A submit does not build: the spec is checked without the nodesets whose environment the
cache lacks (``check_spec(build=False)``), the run is queued at once, and the tick finds
it here before admission. Its environments are built on a builder thread while it waits
in ``queued`` with the reason "building environment for nodeset env (uv, 40 s so far)"
(live in the scheduler's queue: the API's, ``evaltui ls``, the TUI's; and in
scheduler.json every :data:`SAY_EVERY_SEC` for readers of the file); it is no candidate
meanwhile, so it holds no GPU memory. Built, its spec is checked again, completely (the
nodesets in their environments: nodes, params, step limits), and it becomes a candidate
in the same tick; a failed build or check fails it with one line (a build's names its
log).

Two runs asking for the same environment build it once: one build per environment key in
this scheduler, and the cache's lock between processes (engine/foreign/envcache.py). A
scheduler killed mid-build loses nothing: the run is queued on disk, the build's steps
die with it, and the next scheduler, finding no marker in the cache, builds again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunState
from evaltui.engine.foreign.envcache import (
    EnvBuildError,
    builder,
    ensure_built,
    environment_key,
    is_built,
)
from evaltui.engine.foreign.envspec import NodesetEnvironment
from evaltui.engine.graph.definition import GraphDefinition, GraphError
from evaltui.engine.graph.specchecks import validate_in_workspace
from evaltui.rundir.layout import now_iso
from evaltui.scheduler.admission.decision import Wait, WaitKind
from evaltui.scheduler.core import Core
from evaltui.scheduler.runs.jobs import Building, Job

log = logging.getLogger(__name__)

SAY_EVERY_SEC = 5.0
"""How often a building run's reason (its seconds so far) reaches scheduler.json."""


@dataclass
class _OneBuild:
    """One environment being built by this scheduler, awaited by every run that asks."""

    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None


class EnvBuilds:
    """The runs waiting for their environments, and the builds they wait for."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._builds: dict[str, _OneBuild] = {}
        self._examined: set[Job] = set()
        """Jobs looked at (by identity: a run cancelled and resumed is a new Job)."""

    def tick(self) -> None:
        """(the tick, before admission) Start builds for queued runs not looked at yet;
        end the waits whose builds ended; say how long the others have waited."""
        c = self.core
        with c.lock:
            self._examined = {j for j in self._examined if c.jobs.get(j.run_id) is j}
            fresh = [j for j in c.queue if j not in self._examined]
            self._examined.update(fresh)
        for job in fresh:
            unbuilt = _unbuilt(job)
            if unbuilt:
                self._start(job, unbuilt)
        now = time.monotonic()
        with c.lock:
            for job in [j for j in c.queue if j.building is not None]:
                self._tend(job, now)

    def _start(self, job: Job, unbuilt: dict[str, NodesetEnvironment]) -> None:
        c = self.core
        first = next(iter(unbuilt))
        with c.lock:
            if job.state is not RunState.QUEUED or job.run_id not in c.jobs:
                return  # cancelled or taken over meanwhile
            job.building = Building(first, builder(), time.monotonic())
            log.info("run %s: building the environment of nodeset %s", job.run_id, first)
        threading.Thread(target=self._build_all, args=(job, job.building, unbuilt),
                         name=f"evaltui-envbuild-{job.run_id}", daemon=True).start()

    def _build_all(self, job: Job, building: Building,
                   unbuilt: dict[str, NodesetEnvironment]) -> None:
        """Builder thread: each environment the run waits for, then its spec checked again."""
        try:
            for name, env in unbuilt.items():
                building.nodeset = name
                error = self._build_once(env, name)
                if error is not None:
                    building.error = error
                    return
            assert job.spec is not None
            building.spec = validate_in_workspace(job.spec.to_json_dict()).spec
        except SpecError as exc:
            building.error = str(exc)  # "graph.nodesets.env.impl: ..." as at a submit
        except Exception as exc:  # reported on the run; the scheduler carries on
            log.exception("run %s: checking it after its build failed", job.run_id)
            building.error = f"cannot check the run once its environment was built: {exc}"
        finally:
            building.done = True
            self.core.nudge()

    def _build_once(self, env: NodesetEnvironment, name: str) -> str | None:
        """Build ``env`` (or wait for this scheduler's build of it); its error line."""
        key = environment_key(env)
        with self._lock:
            mine = key not in self._builds or self._builds[key].done.is_set()
            if mine:
                self._builds[key] = _OneBuild()
            build = self._builds[key]
        if not mine:
            build.done.wait()
            return build.error
        try:
            if not is_built(env):  # another process may have built it since
                ensure_built(env, f"nodeset {name!r}", say=log.info)
        except (EnvBuildError, OSError) as exc:
            build.error = str(exc)
        finally:
            build.done.set()
        return build.error

    def _tend(self, job: Job, now: float) -> None:
        """One building job at the tick (core lock held)."""
        c = self.core
        building = job.building
        assert building is not None
        if not building.done:
            reason = (f"building environment for nodeset {building.nodeset} "
                      f"({building.builder}, {now - building.started:.0f} s so far)")
            c.set_wait(job, Wait(job.run_id, WaitKind.BUILDING, reason))
            if now - building.said_at >= SAY_EVERY_SEC:
                building.said_at = now
                job.set(waiting_reason=reason)  # for readers of the file (another backend)
                c.writer.schedule(job)
            return
        job.building = None
        if building.error is not None:
            log.error("run %s: %s", job.run_id, building.error)
            c.queue.remove(job)
            c.jobs.pop(job.run_id, None)
            c.transition(job, RunState.FAILED, error=building.error, finished_at=now_iso(),
                         waiting_reason=None, waiting_kind=None)
            return
        job.spec = building.spec
        c.set_wait(job, Wait(job.run_id, WaitKind.BUILDING,
                             "environment built: admission at the next tick"))


def _unbuilt(job: Job) -> dict[str, NodesetEnvironment]:
    """The job's nodesets whose own environment the cache lacks (none for a spec that does
    not parse: its run process reports that)."""
    nodesets = job.spec.graph.get("nodesets") if job.spec is not None else None
    if not isinstance(nodesets, dict) or not any(
            isinstance(ns, dict) and "environment" in ns for ns in nodesets.values()):
        return {}
    try:
        graph = GraphDefinition.from_dict(job.spec.graph)  # type: ignore[union-attr]
        return {name: ns.environment for name, ns in graph.nodesets.items()
                if ns.environment is not None and not is_built(ns.environment)}
    except (GraphError, EnvBuildError, OSError):
        return {}
