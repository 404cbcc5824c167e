"""BatchEvalRunner: scores a graph on the selected episodes and fills the run dir.

It reads ``spec.json``, writes ``graph.json``, runs each episode through the LoopRunner
with its own ExecutionLogger, writes each ``episode.json`` as soon as its episode ends,
keeps ``summary.json`` fresh through a SummaryWriter, and touches ``_DONE`` last.
Episodes run one after another here (worker_count nodeset replicas come with the pool).
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.engine.datasets import load_episodes
from evaltui.engine.logger import ExecutionLogger
from evaltui.engine.loop import EpisodeOutcome, LoopRunner
from evaltui.engine.nodes import NodeSet
from evaltui.engine.summary import SummaryWriter, now_iso
from evaltui.rundir import episode_dir, read_json, touch_done, write_json_atomic
from evaltui.spec import CheckedSpec, SpecError, check_spec, parse_spec
from evaltui.states import EpisodeStatus, SummaryStatus

EXIT_OK, EXIT_FAILED, EXIT_CANCELLED = 0, 1, 3


class BatchEvalRunner:
    """Runs one eval from its run dir; ``stop`` (set by SIGTERM) ends it consistently."""

    def __init__(self, run_dir: Path, stop: threading.Event | None = None) -> None:
        self.run_dir = run_dir
        self.run_id = run_dir.name
        self.stop = stop or threading.Event()

    def run(self) -> int:
        """Run every selected episode; returns the process exit code."""
        header = {"run_id": self.run_id, "graph_name": None, "dataset": None, "split": None,
                  "worker_count": 1}
        try:
            spec_data = read_json(self.run_dir / "spec.json")
            checked = check_spec(parse_spec(spec_data))
        except (OSError, ValueError, SpecError) as exc:
            return self._fail(header, f"cannot load the run: {exc}")
        ev = checked.spec.eval
        header.update(graph_name=ev.graph_name or checked.graph.name, dataset=ev.dataset,
                      split=checked.split, worker_count=ev.worker_count)
        specs = {n: checked.classes[nd.nodeset].node_specs()[nd.op]
                 for n, nd in checked.graph.nodes.items()}
        write_json_atomic(self.run_dir / "graph.json", self._graph_snapshot(checked, specs))
        episodes = load_episodes(checked.dataset_path)
        summary = SummaryWriter(self.run_dir, header, len(checked.episode_indices))
        kept, attempts = self._earlier_rows(checked.episode_indices)
        summary.preload(kept)
        summary.start()
        try:
            registry = self._build(checked)
        except Exception as exc:
            summary.finish(SummaryStatus.FAILED, "cannot build the graph's nodesets: "
                           + "".join(traceback.format_exception_only(exc)).strip())
            touch_done(self.run_dir)
            return EXIT_FAILED
        loop = LoopRunner(checked.graph, specs, step_budget=ev.step_budget,
                          per_step_budget_sec=ev.per_step_budget_sec, stop=self.stop)
        row_base = {**header, "nodes": self._node_list(checked, specs)}
        done_indices = {int(r["episode_index"]) for r in kept}
        try:
            for index in checked.episode_indices:
                if index in done_indices:
                    continue
                if self.stop.is_set():
                    break
                episode = episodes[index]
                ep_dir = episode_dir(self.run_dir, index)
                with ExecutionLogger(ep_dir) as logger:
                    outcome = loop.run_episode(episode, registry, logger)
                row = self._row(row_base, index, episode, outcome, attempts.get(index, 0) + 1)
                write_json_atomic(ep_dir / "episode.json", row)
                summary.add(row)
                if outcome.status is EpisodeStatus.ERROR:
                    # A node that raised may have left its nodeset in any state: start the
                    # next episode on fresh replicas.
                    registry = self._rebuild(checked, registry)
        finally:
            _close_all(registry)
        cancelled = self.stop.is_set()
        summary.finish(SummaryStatus.CANCELLED if cancelled else SummaryStatus.DONE)
        touch_done(self.run_dir)
        return EXIT_CANCELLED if cancelled else EXIT_OK

    # ---- pieces ---------------------------------------------------------------------------
    def _fail(self, header: Mapping[str, Any], error: str) -> int:
        summary = SummaryWriter(self.run_dir, header, 0)
        summary.finish(SummaryStatus.FAILED, error)
        touch_done(self.run_dir)
        return EXIT_FAILED

    def _build(self, checked: CheckedSpec) -> dict[str, NodeSet]:
        registry: dict[str, NodeSet] = {}
        try:
            for name, ns in checked.graph.nodesets.items():
                registry[name] = checked.classes[name](**ns.params)
        except Exception:
            _close_all(registry)
            raise
        return registry

    def _rebuild(self, checked: CheckedSpec, registry: dict[str, NodeSet]) -> dict[str, NodeSet]:
        fresh = dict(registry)
        for name, ns in checked.graph.nodesets.items():
            if ns.parallelism != "shared":
                _close_quietly(registry[name])
                fresh[name] = checked.classes[name](**ns.params)
        return fresh

    def _earlier_rows(self, indices: list[int]) -> tuple[list[dict[str, Any]], dict[int, int]]:
        """Rows of episodes already ``ok`` in this run dir (kept) and attempts so far."""
        kept: list[dict[str, Any]] = []
        attempts: dict[int, int] = {}
        for index in indices:
            path = episode_dir(self.run_dir, index) / "episode.json"
            if not path.exists():
                continue
            try:
                row = read_json(path)
            except (OSError, ValueError):
                continue
            attempts[index] = int(row.get("attempts", 1))
            if row.get("status") == EpisodeStatus.OK.value:
                kept.append(row)
        return kept, attempts

    @staticmethod
    def _node_list(checked: CheckedSpec, specs: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [
            {"name": n, "nodeset": nd.nodeset, "op": nd.op,
             "inputs": list(specs[n].inputs), "outputs": list(specs[n].outputs)}
            for n, nd in checked.graph.nodes.items()
        ]

    def _graph_snapshot(self, checked: CheckedSpec, specs: Mapping[str, Any]) -> dict[str, Any]:
        graph = checked.graph.to_dict()
        for name, params in checked.graph.resolved_params(checked.classes).items():
            graph["nodesets"][name]["params"] = params
        graph["order"] = checked.graph.topological_order()
        graph["node_ports"] = {n: {"inputs": list(s.inputs), "outputs": list(s.outputs)}
                               for n, s in specs.items()}
        return graph

    @staticmethod
    def _row(base: Mapping[str, Any], index: int, episode: Mapping[str, Any],
             outcome: EpisodeOutcome, attempts: int) -> dict[str, Any]:
        return {
            "episode_index": index,
            "episode_id": episode.get("episode_id"),
            "scene_id": episode.get("scene_id"),
            "instruction": episode.get("instruction"),
            "metrics": outcome.metrics,
            "step_count": outcome.step_count,
            "elapsed_sec": round(outcome.elapsed_sec, 4),
            "status": outcome.status.value,
            "error": outcome.error,
            "worker_id": 0,
            "attempts": attempts,
            "finished_at": now_iso(),
            **base,
        }


def _close_quietly(ns: NodeSet) -> None:
    try:
        ns.close()
    except Exception:  # closing a broken nodeset must not hide the episode's own error
        traceback.print_exc()


def _close_all(registry: Mapping[str, NodeSet]) -> None:
    for ns in registry.values():
        _close_quietly(ns)
