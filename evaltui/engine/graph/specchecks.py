"""Checking a JobSpec against the world: its graph resolves, its episodes exist.

:func:`check_spec` imports every nodeset impl, checks the DAG, selects the episodes and
resolves the defaults that depend on them (the step budget); it also collects the
warnings a user should see at submit. The result, a :class:`CheckedSpec`, is built once
per submit and is what the run subprocess and its workers run from.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.spec import DEFAULT_STEP_BUDGET, JobSpec, SpecError, parse_spec
from evaltui.contract.stoprule import parse_rule
from evaltui.engine.episode.metrics import PATH_METRICS
from evaltui.engine.executor.kinds import executor_of
from evaltui.engine.foreign.envcache import EnvBuildError, is_built
from evaltui.engine.foreign.envspec import NodesetEnvironment
from evaltui.engine.graph.benchmarks import get_benchmark
from evaltui.engine.graph.datasets import (
    DatasetError,
    load_episodes,
    resolve_dataset,
    select_episodes,
)
from evaltui.engine.graph.definition import GraphDefinition, GraphError
from evaltui.engine.graph.paramtypes import (
    ParamTypeError,
    check_declared_params,
    check_param_types,
)
from evaltui.engine.nodes import NodeSet
from evaltui.engine.stats.stopwatch import stop_fields


@dataclass
class CheckedSpec:
    """A spec with its graph resolved and its episodes selected: ready to run."""

    spec: JobSpec
    graph: GraphDefinition
    classes: dict[str, type[NodeSet]]
    dataset_path: Path
    split: str
    episode_indices: list[int]
    warnings: list[str] = field(default_factory=list)
    """Things the user should know before the run starts (printed at submit)."""
    unbuilt: dict[str, NodesetEnvironment] = field(default_factory=dict)
    """Checked with ``build=False``: the nodesets whose own environment is not built yet,
    left unchecked (their classes, the nodes' ports, the env's step limits). Check the
    spec again once they are built."""
    notes: list[str] = field(default_factory=list)
    """What the nodesets' own checks found and said (``check_params``'s return, e.g. the
    renderer a benchmark probed): ``eval`` prints them, summary.json keeps them."""


def check_spec(spec: JobSpec, *, build: bool = True) -> CheckedSpec:
    """Resolve the graph (with selectors) and the episode selection, or raise SpecError.

    ``build=False`` (a scheduler's submit): a nodeset whose own environment evaltui would
    build first is left unchecked (``CheckedSpec.unbuilt``) instead of built here."""
    try:
        graph = GraphDefinition.from_dict(spec.graph).with_selectors(spec.eval.selectors)
        unbuilt = {} if build else _unbuilt(graph)
        classes = graph.check(defer=unbuilt)
        notes: list[str] = []
        for name, ns in graph.nodesets.items():
            if name in unbuilt:
                continue
            try:
                check_param_types(classes[name], ns.params)
                notes += check_declared_params(classes[name], ns.params)
            except ParamTypeError as exc:
                where = f".{exc.param}" if exc.param else ""
                raise GraphError(f"nodesets.{name}.params{where}", exc.message) from None
    except GraphError as exc:
        field = exc.path if exc.path.startswith("selectors") else f"graph.{exc.path}"
        if field.startswith("selectors"):
            field = f"eval.{field}"
        raise SpecError(field, str(exc).split(": ", 1)[1]) from None
    ev = spec.eval
    check_executor(spec)
    try:
        path, split = resolve_dataset(ev.dataset, ev.split)
        episodes = load_episodes(path)
        indices = select_episodes(
            len(episodes),
            episodes,
            start=ev.start_episode_index,
            count=ev.episode_count,
            indices=ev.episode_indices,
            selectors=ev.episode_selectors,
        )
    except DatasetError as exc:
        raise SpecError(exc.field, str(exc).split(": ", 1)[1]) from None
    selected = [episodes[i] for i in indices]
    budget, warnings = ev.step_budget, []
    if graph.loop.env not in unbuilt:
        try:
            budget, warnings = resolve_step_budget(ev.step_budget, classes[graph.loop.env],
                                                   selected)
        except ValueError as exc:  # the env refuses an episode it cannot run (step_limit)
            raise SpecError("eval.dataset", str(exc)) from None
    bench = get_benchmark(ev.dataset)
    if bench is None or bench.path_metrics:  # Meta-World has no paths: nothing to warn
        warnings += reference_warnings(selected)
    stop = stop_fields(ev)
    if ev.stop_when is not None and (why := metric_absent(ev.dataset, parse_rule(
            ev.stop_when).metric)):
        raise SpecError("eval.stop_when", why)
    spec = spec.model_copy(update={"eval": ev.model_copy(update={
        "step_budget": budget, **stop})})
    return CheckedSpec(spec=spec, graph=graph, classes=classes, dataset_path=path, split=split,
                       episode_indices=indices, warnings=warnings, unbuilt=unbuilt,
                       notes=notes)


def _unbuilt(graph: GraphDefinition) -> dict[str, NodesetEnvironment]:
    """The graph's nodesets whose own environment the cache lacks (a script without its
    PEP 723 header: GraphError at its ``environment``)."""
    out = {}
    for name, ns in graph.nodesets.items():
        try:
            if ns.environment is not None and not is_built(ns.environment):
                out[name] = ns.environment
        except (EnvBuildError, OSError) as exc:
            raise GraphError(f"nodesets.{name}.environment", str(exc)) from None
    return out


def metric_absent(dataset: str | None, metric: str) -> str | None:
    """Why rows of ``dataset`` never carry ``metric`` (a path metric of a benchmark without
    paths, as Meta-World), else None: a rule on it would never be met, silently."""
    bench = get_benchmark(dataset)
    if bench is None or bench.path_metrics or metric not in PATH_METRICS:
        return None
    return (f"{metric!r}: {bench.name} rows have no paths, so no {', '.join(PATH_METRICS)} "
            "(stop on success)")


def check_executor(spec: JobSpec) -> None:
    """SpecError on ``eval.executor`` when its executor cannot run here (``ray`` needs the
    ``ray`` extra where the spec is checked, ``slurm`` Slurm's client commands)."""
    why = executor_of(spec).missing()
    if why is not None:
        raise SpecError("eval.executor", why)


def resolve_step_budget(asked: int | None, env_cls: type[NodeSet],
                        episodes: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """The step budget to run with, and a warning when it cuts the env's own limit."""
    step_limit = getattr(env_cls, "step_limit", None)
    in_own_env = getattr(env_cls, "step_limits", None)  # one call into its environment
    limits = [lim for lim in in_own_env(episodes) if lim is not None] if in_own_env else \
        [lim for ep in episodes if step_limit is not None and (lim := step_limit(ep)) is not None]
    if asked is None:
        return (max(limits) if limits else DEFAULT_STEP_BUDGET), []
    cut = [lim for lim in limits if lim > asked]
    if not cut:
        return asked, []
    return asked, [f"eval.step_budget {asked} is below the env's own step limit "
                   f"({max(cut)}) on {len(cut)} of {len(episodes)} episodes: they may be "
                   "cut short and scored as failures where the benchmark would not"]


def reference_warnings(episodes: list[dict[str, Any]]) -> list[str]:
    """One warning per kind of reference data that some selected episodes lack."""
    warnings = []
    no_ref = sum(1 for ep in episodes if not ep.get("reference_path"))
    no_geo = sum(1 for ep in episodes if ep.get("geodesic_distance") is None)
    if no_ref:
        warnings.append(f"{no_ref} of {len(episodes)} episodes have no reference_path: "
                        "nDTW and SDTW leave them out (see metrics_n)")
    if no_geo:
        warnings.append(f"{no_geo} of {len(episodes)} episodes have no geodesic_distance: "
                        "SPL leaves them out (see metrics_n)")
    return warnings


def validate_spec(data: Any) -> CheckedSpec:
    """parse_spec then check_spec: the one call submit paths use."""
    return check_spec(parse_spec(data))


def validate_in_workspace(data: Mapping[str, Any]) -> CheckedSpec:
    """:func:`validate_spec` with the spec's ``active_workspace_dir`` on ``sys.path`` first:
    the check imports the user's nodesets, as the run will (a submit from another
    process's cwd, e.g. to Slurm)."""
    workspace = data.get("active_workspace_dir")
    if isinstance(workspace, str) and workspace and workspace not in sys.path:
        sys.path.insert(0, workspace)
    return validate_spec(dict(data))
