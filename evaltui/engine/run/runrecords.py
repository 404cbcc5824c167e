"""What a run writes about its graph and episodes: graph.json, the node list of every row,
an episode's row from its result, and the rows a resumed run keeps."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.contract.records import (
    EPISODE_FILENAME,
    EpisodeRow,
    NodeRef,
)
from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.loop import EpisodeOutcome
from evaltui.engine.episode.metrics import failure_metrics
from evaltui.engine.episode.trajrecord import (
    dataset_id,
    task_and_seed,
)
from evaltui.engine.executor.protocol import EpisodeResult
from evaltui.engine.graph.specchecks import CheckedSpec
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import episode_dir, now_iso


def earlier_rows(run_dir: Path, indices: list[int]) -> tuple[list[EpisodeRow], dict[int, int]]:
    """Rows of episodes already ``ok`` in the run dir (kept) and their attempts so far."""
    kept: list[EpisodeRow] = []
    attempts: dict[int, int] = {}
    for index in indices:
        path = episode_dir(run_dir, index) / EPISODE_FILENAME
        if not path.exists():
            continue
        try:  # a ValidationError is a ValueError: an unusable row is run again
            row = EpisodeRow.model_validate(read_json(path))
        except (OSError, ValueError):
            continue
        attempts[index] = row.attempts if row.attempts is not None else 1
        if row.status is EpisodeStatus.OK:
            kept.append(row)
    return kept, attempts

def node_list(checked: CheckedSpec, specs: Mapping[str, Any]) -> list[NodeRef]:
    """The graph's nodes as each episode row lists them (so an episode dir replays alone)."""
    return [
        NodeRef(name=n, nodeset=nd.nodeset, op=nd.op, inputs=list(specs[n].inputs),
                outputs=list(specs[n].outputs))
        for n, nd in checked.graph.nodes.items()
    ]

def graph_snapshot(checked: CheckedSpec, specs: Mapping[str, Any]) -> dict[str, Any]:
    """graph.json: the graph with its params resolved, firing order and each node's ports."""
    graph = checked.graph.to_dict()
    for name, params in checked.graph.resolved_params(checked.classes).items():
        graph["nodesets"][name]["params"] = params
    graph["order"] = checked.graph.topological_order()
    graph["node_ports"] = {n: {"inputs": list(s.inputs), "outputs": list(s.outputs)}
                           for n, s in specs.items()}
    return graph

def episode_row(base: Mapping[str, Any], episode: Mapping[str, Any],
         result: EpisodeResult) -> EpisodeRow:
    outcome: EpisodeOutcome = result.outcome
    metrics: dict[str, float | None] = dict(outcome.metrics)
    if not metrics and outcome.status in (EpisodeStatus.ERROR, EpisodeStatus.TIMEOUT):
        # The worker died or hung before the loop could score it: still a failure.
        metrics = dict(failure_metrics(
            has_reference=bool(episode.get("reference_path")),
            has_geodesic=episode.get("geodesic_distance") is not None))
    instruction = episode.get("instruction")
    return EpisodeRow(
        episode_index=result.index, episode_id=dataset_id(episode.get("episode_id")),
        scene_id=dataset_id(episode.get("scene_id")),
        instruction=instruction if instruction is None else str(instruction),
        **task_and_seed(episode),
        metrics=metrics, step_count=outcome.step_count,
        elapsed_sec=round(outcome.elapsed_sec, 4), status=outcome.status,
        error=outcome.error, worker_id=result.worker_id, node=result.node,
        attempts=result.attempts,
        finished_at=now_iso(), **base)
