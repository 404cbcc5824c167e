"""A JobSpec dict from command-line style options: the one builder of the CLI and the TUI.

``evaltui eval``/``submit`` call it with their parsed options, the TUI's submit form and
``evaltui demo`` with the values they hold; every option is a keyword argument, so no
caller fakes an ``argparse.Namespace``. The result is validated later, by submit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evaltui.contract.spec import PER_GPU, SpecError
from evaltui.graphs import builtin_graph_names, builtin_graph_path

DEMO: dict[str, Any] = {"graph": "bot", "dataset": "babyai", "split": "GoToLocal",
                        "episodes": 50}
"""What ``--demo`` runs: the built-in bot on 50 BabyAI GoToLocal episodes."""


def build_spec(target: str | None = None, *, demo: bool = False, dataset: str | None = None,
               split: str | None = None, episodes: int | None = None, start: int | None = None,
               indices: str | None = None, workers: int | None = None,
               step_budget: int | None = None, step_timeout: float | None = None,
               max_error_rate: float | None = None, executor: str | None = None,
               ray_address: str | None = None, slurm: dict[str, Any] | None = None,
               sets: Iterable[str] = (),
               workspace: str | None = None,
               replicas: str | int | None = None, stop_when: str | None = None,
               order_seed: int | None = None,
               max_episodes: int | None = None) -> dict[str, Any]:
    """The JobSpec dict from a target (graph file, JobSpec file or built-in graph name)
    plus overrides; options left None keep the file's value or the spec default."""
    if demo:
        target = target or DEMO["graph"]
        dataset = dataset or str(DEMO["dataset"])
        split = split or str(DEMO["split"])
        episodes = episodes or int(DEMO["episodes"])
    spec = _load_target(target)
    ev = dict(spec.get("eval") or {})
    overrides = {"dataset": dataset, "split": split, "episode_count": episodes,
                 "start_episode_index": start, "worker_count": workers,
                 "step_budget": step_budget, "per_step_budget_sec": step_timeout,
                 "max_error_rate": max_error_rate, "executor": executor,
                 "ray_address": ray_address, "stop_when": stop_when,
                 "order_seed": order_seed, "max_episodes": max_episodes}
    ev.update({k: v for k, v in overrides.items() if v is not None})
    if slurm_given := {k: v for k, v in (slurm or {}).items() if v not in (None, [])}:
        ev["slurm"] = {**dict(ev.get("slurm") or {}), **slurm_given}  # eval.slurm's keys
    if indices:
        try:
            ev["episode_indices"] = [int(x) for x in indices.split(",") if x.strip()]
        except ValueError:
            raise SpecError("eval.episode_indices",
                            f"not a list of integers: {indices!r}") from None
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SpecError("eval.selectors", f"--set {item!r} must look like nodeset.param=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        ev.setdefault("selectors", {})[key] = value
    data = ev.get("dataset")
    if isinstance(data, str) and data != "babyai" and Path(data).exists():
        ev["dataset"] = str(Path(data).resolve())  # the run subprocess has another cwd
    spec["eval"] = ev
    if replicas is not None:
        spec["graph"] = with_replicas(spec.get("graph"), replicas)
    if workspace is not None and not Path(workspace).is_dir():
        raise SpecError("active_workspace_dir", f"--workspace {workspace}: "
                        + ("not a directory" if Path(workspace).exists() else
                           "no such directory"))
    spec.setdefault("active_workspace_dir", str(Path(workspace or os.getcwd()).resolve()))
    return spec


def _load_target(target: str | None) -> dict[str, Any]:
    if target is None:
        raise SpecError("target", "give a graph file, a JobSpec file, a built-in graph name "
                        "or --demo")
    path = Path(target)
    if path.is_dir():
        raise SpecError("target", f"{target} is a directory: give a graph or JobSpec JSON "
                        f"file, or a built-in graph name ({', '.join(builtin_graph_names())})")
    if not path.is_file():
        builtin = builtin_graph_path(target)
        if builtin is None:
            raise SpecError("target", f"no such file and no built-in graph {target!r} "
                            f"(built-ins: {', '.join(builtin_graph_names())})")
        path = builtin
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecError("target", f"{path}: not a JSON file ({exc})") from None
    return dict(data) if isinstance(data, dict) and "graph" in data else {"graph": data}


# ---- --replicas (DESIGN §12 "Replicas") ---------------------------------------------------
def parse_replicas(text: str | int) -> int | str:
    """``--replicas`` as given: a count >= 1 or ``per_gpu``; SpecError saying why not."""
    if text == PER_GPU:
        return PER_GPU
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or isinstance(text, bool):
        raise SpecError("replicas", f"--replicas must be an integer >= 1 or {PER_GPU!r}, "
                        f"got {text!r}")
    return value


def with_replicas(graph: Any, replicas: str | int) -> dict[str, Any]:
    """A copy of the graph JSON with ``replicas`` on every shared nodeset (a
    ``min_replicas`` above a count is lowered to it); SpecError if it has none."""
    value = parse_replicas(replicas)
    nodesets = graph.get("nodesets") if isinstance(graph, dict) else None
    shared = [name for name, ns in (nodesets if isinstance(nodesets, dict) else {}).items()
              if isinstance(ns, dict) and ns.get("parallelism") == "shared"]
    if not shared:
        name = graph.get("name") if isinstance(graph, dict) else None
        raise SpecError("replicas", f"--replicas needs a 'shared' nodeset; graph {name!r} "
                        "has none")
    out = {**graph, "nodesets": dict(nodesets)}  # type: ignore[arg-type]
    for name in shared:
        ns = dict(out["nodesets"][name])
        ns["replicas"] = value
        least = ns.get("min_replicas", 1)
        if isinstance(value, int) and isinstance(least, int) and least > value:
            ns["min_replicas"] = value
        out["nodesets"][name] = ns
    return out
