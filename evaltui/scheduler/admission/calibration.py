"""Calibration: measured peak memory per nodeset (impl + params), and job estimates from it.

After a run ends, its measured peak (VRAM of its session's processes, and RSS of its
process tree) is split over the nodesets it hosted and stored per nodeset in
``state_dir()/calibration.json`` (flock-guarded; several schedulers share it). A nodeset
key is its impl plus its params after selectors, so ``policy.noise=0.1`` and ``0.2`` of
the same model share nothing but are each learned once.

Splitting a run's peak P over its nodesets (``m`` = replicas: worker_count for a
replicated env nodeset, else 1): nodesets already calibrated keep their share, the
remainder goes to the others per instance; if all were calibrated, each is scaled so
that the run's sum matches P. The estimate is the max of a nodeset's last few samples,
so one lucky short run does not shrink it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Container, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from evaltui.contract.spec import JobSpec
from evaltui.engine.graph.definition import GraphDefinition, GraphError
from evaltui.rundir.jsonfiles import flocked, read_json_object, write_json_atomic
from evaltui.rundir.layout import PRIVATE_MODE, state_dir
from evaltui.scheduler.admission.cores import run_cores

Resource = Literal["vram", "ram", "cpu"]
"""``cpu``: millicores per worker, learnt per graph (:func:`graph_key`), not per nodeset."""
CALIBRATION_FILENAME = "calibration.json"
SAMPLES_KEPT = 5
RAM_FALLBACK_MB_PER_PROCESS = 256
"""Host RAM assumed per process (run + workers) until a run of the nodesets is measured."""
_RELOAD_CHECK_SEC = 1.0

log = logging.getLogger(__name__)


def nodeset_key(impl: str, params: dict[str, Any]) -> str:
    """A stable key for a nodeset instance: its impl plus canonical params."""
    blob = orjson.dumps({"impl": impl, "params": params},
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha1(blob).hexdigest()[:16]


def graph_key(spec: JobSpec) -> str:
    """The calibration key of a job's graph for its CPU use per worker: its nodesets'
    names and impls, not their params (a matrix over ``policy.noise`` or a ``repeat``
    runs the same code: what the first member measured holds for the rest)."""
    nodesets = spec.graph.get("nodesets") if isinstance(spec.graph, dict) else None
    impls = {str(name): str(ns.get("impl")) for name, ns in (nodesets or {}).items()
             if isinstance(ns, dict)}
    return nodeset_key("graph", impls)


@dataclass(frozen=True)
class NodesetPart:
    """One nodeset of a job, as calibration sees it."""

    name: str
    key: str
    impl: str
    params: dict[str, Any]
    parallelism: str
    replicas: int


def nodeset_parts(spec: JobSpec) -> list[NodesetPart]:
    """The job's nodesets with their replica counts (params after selectors)."""
    try:
        graph = GraphDefinition.from_dict(spec.graph).with_selectors(spec.eval.selectors)
    except GraphError:
        return []
    workers = spec.eval.worker_count
    return [
        NodesetPart(name, nodeset_key(ns.impl, ns.params), ns.impl, dict(ns.params),
                    ns.parallelism, workers if ns.parallelism == "replicated" else 1)
        for name, ns in graph.nodesets.items()
    ]


@dataclass(frozen=True)
class Estimate:
    """What admitting a job will cost, and where the number came from."""

    vram_mb: int
    ram_mb: int
    source: str
    """``calibrated``, ``declared`` (marginal_vram_mb) or ``partly calibrated``."""
    needs_gpu: bool
    """False only when calibration shows the job uses no VRAM: it is then not put on a GPU."""
    per_nodeset_mb: dict[str, int]
    cpus: float = 0.0
    """CPU cores: workers x cores per worker (measured, else declared, else 1; cores.py)."""


class Calibration:
    """The per-nodeset peaks of this machine, cached in memory and reloaded when changed."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else state_dir()
        self.path = self.directory / CALIBRATION_FILENAME
        self.lock_path = self.directory / "calibration.lock"
        self._data: dict[str, Any] = {}
        self._mtime_ns = -1
        self._checked_at = -1e9
        self.version = 0
        """Bumped whenever the peaks change (estimates computed before are stale)."""

    # ---- reading --------------------------------------------------------------------------
    def peak(self, resource: Resource, key: str) -> int | None:
        """The calibrated peak of one nodeset instance, or None if never measured."""
        self.refresh()
        entry = self._data.get(key)
        samples = (entry or {}).get(resource) or []
        return max(samples) if samples else None

    def entries(self) -> dict[str, dict[str, Any]]:
        """All calibrated nodesets: ``{key: {impl, params, vram: [...], ram: [...], ...}}``."""
        self.refresh()
        return {k: dict(v) for k, v in self._data.items()}

    def estimate(self, spec: JobSpec, parts: Sequence[NodesetPart],
                 loaded_shared: Container[str] = ()) -> Estimate:
        """VRAM and RAM to admit ``spec``: calibrated peaks x replicas, else the declared need.

        ``loaded_shared`` holds keys of shared nodesets already hosted: they count ~0.
        """
        vram_known, vram_missing, per_nodeset = 0, False, {}
        ram_known, ram_missing = 0, False
        for part in parts:
            if part.parallelism == "shared" and part.key in loaded_shared:
                per_nodeset[part.name] = 0
                continue
            vram = self.peak("vram", part.key)
            ram = self.peak("ram", part.key)
            if vram is None:
                vram_missing = True
            else:
                per_nodeset[part.name] = vram * part.replicas
                vram_known += vram * part.replicas
            if ram is None:
                ram_missing = True
            else:
                ram_known += ram * part.replicas
        declared = spec.scheduling.marginal_vram_mb
        if not vram_missing and parts:
            vram, source = vram_known, "calibrated"
        elif vram_known:
            vram, source = max(vram_known, declared), "partly calibrated"
        else:
            vram, source = declared, "declared"
        fallback_ram = spec.scheduling.host_mem_mb
        if fallback_ram is None:
            fallback_ram = RAM_FALLBACK_MB_PER_PROCESS * (1 + spec.eval.worker_count)
        ram = ram_known if (parts and not ram_missing) else max(ram_known, fallback_ram)
        millicores = self.peak("cpu", graph_key(spec))
        cpus = run_cores(spec.eval.worker_count, spec.scheduling.cpus_per_worker,
                         millicores / 1000 if millicores is not None else None)
        return Estimate(vram_mb=int(vram), ram_mb=int(ram), source=source,
                        needs_gpu=source != "calibrated" or vram > 0,
                        per_nodeset_mb=per_nodeset, cpus=cpus)

    def record_cores(self, spec: JobSpec, cores_per_worker: float) -> None:
        """Store a finished run's measured CPU use per worker under its graph."""
        part = NodesetPart("graph", graph_key(spec), "graph", {}, "graph", 1)
        with self._locked() as data:
            _add_sample(data, part, "cpu", max(1.0, cores_per_worker * 1000))

    # ---- learning -------------------------------------------------------------------------
    def record_run(self, resource: Resource, parts: Sequence[NodesetPart],
                   measured_mb: float) -> None:
        """Split a run's measured peak over its nodesets and store the shares."""
        merged: dict[str, tuple[NodesetPart, int]] = {}
        for part in parts:  # two identical nodesets in one graph are one calibration entry
            prev = merged.get(part.key)
            merged[part.key] = (part, part.replicas + (prev[1] if prev else 0))
        if not merged or measured_mb < 0:
            return
        with self._locked() as data:
            known = {key: _peak(data, key, resource) for key in merged}
            expected = sum(n * (known[k] or 0) for k, (_, n) in merged.items())
            unknown = [k for k in merged if known[k] is None]
            if unknown:
                rest = max(0.0, measured_mb - expected) / sum(merged[k][1] for k in unknown)
                shares = {k: rest if known[k] is None else float(known[k] or 0) for k in merged}
            elif expected > 0:
                shares = {k: (known[k] or 0) * measured_mb / expected for k in merged}
            else:
                even = measured_mb / sum(n for _, n in merged.values())
                shares = {k: even for k in merged}
            for key, (part, _) in merged.items():
                _add_sample(data, part, resource, shares[key])

    def record_nodeset(self, resource: Resource, part: NodesetPart, measured_mb: float) -> None:
        """Store the measured peak of a nodeset that ran alone in its process (a shared host)."""
        with self._locked() as data:
            _add_sample(data, part, resource, measured_mb)

    # ---- storage --------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with flocked(self.lock_path):
            data = self._read()
            yield data
            try:
                write_json_atomic(self.path, {"version": 1, "nodesets": data},
                                  mode=PRIVATE_MODE)
            except OSError as exc:
                # A full or read-only state dir: this measurement is not learnt, and the
                # tick that was learning it goes on (reaping, admitting) regardless.
                log.warning("cannot store calibration in %s: %s; measurement not kept",
                            self.path, exc.strerror or exc)
                return
            self._data, self._mtime_ns = data, self._stat_mtime()
            self.version += 1

    def _read(self) -> dict[str, Any]:
        nodesets = (read_json_object(self.path) or {}).get("nodesets")
        return nodesets if isinstance(nodesets, dict) else {}

    def _stat_mtime(self) -> int:
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return -1

    def refresh(self) -> None:
        """Pick up peaks recorded by other schedulers (a stat at most once a second)."""
        now = time.monotonic()
        if now - self._checked_at < _RELOAD_CHECK_SEC:
            return
        self._checked_at = now
        mtime = self._stat_mtime()
        if mtime != self._mtime_ns:
            self._data, self._mtime_ns = self._read(), mtime
            self.version += 1


def _peak(data: dict[str, Any], key: str, resource: Resource) -> int | None:
    samples = (data.get(key) or {}).get(resource) or []
    return max(samples) if samples else None


def _add_sample(data: dict[str, Any], part: NodesetPart, resource: Resource,
                mb: float) -> None:
    entry = data.setdefault(part.key, {"impl": part.impl, "params": part.params})
    samples = [*entry.get(resource, []), int(round(mb))][-SAMPLES_KEPT:]
    entry[resource] = samples
    entry["updated_at"] = time.time()
