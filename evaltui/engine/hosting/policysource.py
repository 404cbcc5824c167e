"""What ``evaltui serve-policy SOURCE`` serves: a graph's nodeset or a ``module:Class``.

``GRAPH:NODESET`` names a built-in graph (``model:policy``) or a graph JSON file
(``my_graph.json:policy``) and one of its nodesets, with that graph's params;
``module:Class`` a NodeSet class, with no params but those given (``--param K=V``). The
op served is the nodeset's only node, or the one ``--op`` names. Every fault is one line
(:class:`SourceError`), said before anything is built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.engine.graph.paramtypes import ParamTypeError, check_declared_params, check_param_types
from evaltui.engine.nodes import ImplError, NodeSet, import_impl
from evaltui.graphs import builtin_graph_names, builtin_graph_path


class SourceError(ValueError):
    """SOURCE, --op or --param cannot be served (one line)."""


@dataclass(frozen=True)
class PolicySource:
    label: str
    cls: type[NodeSet]
    params: dict[str, Any]
    op: str
    impl: str = ""
    """``module:Class``: with ``params``, the nodeset's calibration key (what runs of it
    measured sizes the server's reservation)."""


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``K=V`` items; V is JSON when it parses, else the string."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SourceError(f"--param {item!r} must look like name=value")
        try:
            params[key.strip()] = json.loads(text)
        except ValueError:
            params[key.strip()] = text
    return params


def resolve_source(source: str, op: str | None = None,
                   params: Mapping[str, Any] | None = None) -> PolicySource:
    left, sep, right = source.rpartition(":")
    if not sep or not left or not right:
        raise SourceError(f"SOURCE {source!r} must be GRAPH:NODESET (e.g. model:policy) "
                          "or module:Class")
    graph_path = builtin_graph_path(left) or (Path(left) if left.endswith(".json") else None)
    if graph_path is not None:
        impl, base = _graph_nodeset(left, graph_path, right)
    else:
        impl, base = source, {}
    try:
        cls = import_impl(impl)
    except ImplError as exc:
        known = ", ".join(builtin_graph_names())
        raise SourceError(f"{exc} (a GRAPH:NODESET source names a built-in graph: "
                          f"{known}, or a .json file)") from None
    merged = {**base, **dict(params or {})}
    try:
        check_param_types(cls, merged)
        check_declared_params(cls, merged)
    except ParamTypeError as exc:
        raise SourceError(f"{source}: param {exc}") from None
    return PolicySource(source, cls, merged, _pick_op(source, cls, op), impl)


def _graph_nodeset(name: str, path: Path, nodeset: str) -> tuple[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SourceError(f"graph {name!r}: cannot read {path}: {exc}") from None
    nodesets = data.get("nodesets") if isinstance(data, dict) else None
    if not isinstance(nodesets, dict) or nodeset not in nodesets:
        have = sorted(nodesets) if isinstance(nodesets, dict) else []
        raise SourceError(f"graph {name!r} has no nodeset {nodeset!r} (has {have})")
    entry = nodesets[nodeset]
    if not isinstance(entry, dict) or not isinstance(entry.get("impl"), str):
        raise SourceError(f"graph {name!r}: nodeset {nodeset!r} has no impl")
    return entry["impl"], dict(entry.get("params") or {})


def _pick_op(source: str, cls: type[NodeSet], op: str | None) -> str:
    specs = cls.node_specs()
    if op is not None:
        if op not in specs:
            raise SourceError(f"{source} has no node op {op!r} (has {sorted(specs)})")
        return op
    if len(specs) != 1:
        raise SourceError(f"{source} has {len(specs)} node ops {sorted(specs)}: "
                          "say which with --op")
    return next(iter(specs))
