"""GraphDefinition: nodesets plus a DAG of nodes that fire once per step (DESIGN §5).

The JSON form (``to_dict``/``from_dict``)::

    {"name": "babyai-bot",
     "nodesets": {"env": {"impl": "pkg.mod:Class", "parallelism": "replicated", "params": {}},
                  "policy": {"impl": "...", "parallelism": "inline", "params": {"noise": 0.0}}},
     "nodes": {"policy": {"nodeset": "policy", "op": "act"},
               "env_step": {"nodeset": "env", "op": "step"}},
     "edges": [["@sim", "policy.sim"], ["policy.action", "env_step.action"]],
     "loop": {"env": "env", "step": "env_step"}}

``@name`` is a loop port: the env's ``set_episode`` gives its first value, and the step
node's output of the same name replaces it after every step; the step node's ``done``
output ends the episode. :meth:`GraphDefinition.check` finds every structural error
(unknown impl or op, cycle, dangling edge, missing port) before anything runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from evaltui.contract.spec import PER_GPU
from evaltui.engine.foreign.envspec import (
    EnvironmentSpecError,
    NodesetEnvironment,
    parse_environment,
)
from evaltui.engine.foreign.hostproc import ForeignRemoteError
from evaltui.engine.foreign.standin import ENVIRONMENT_ERRORS, foreign_class
from evaltui.engine.nodes import EnvNodeSet, ImplError, NodeSet, NodeSpec, Parallelism, import_impl

PARALLELISMS = get_args(Parallelism)



class GraphError(ValueError):
    """A graph definition is malformed; ``path`` names the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"graph.{path}: {message}")
        self.path = path


@dataclass
class NodesetDef:
    impl: str
    parallelism: Parallelism = "inline"
    params: dict[str, Any] = field(default_factory=dict)
    replicas: int | str | None = None
    """A shared nodeset hosted once per GPU: N hosts, or ``"per_gpu"`` (every GPU the run
    gets); None = one host (DESIGN §12 "Replicas")."""
    min_replicas: int = 1
    """The fewest GPUs the run starts on (admission waits for that many)."""
    environment: NodesetEnvironment | None = None
    """Its own Python environment (DESIGN §13); None = evaltui's own interpreter."""


@dataclass
class NodeDef:
    nodeset: str
    op: str


@dataclass
class LoopDef:
    env: str
    step: str


def _require(obj: Any, kind: type | tuple[type, ...], path: str) -> Any:
    if not isinstance(obj, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise GraphError(path, f"expected {names}, got {type(obj).__name__}")
    return obj


def split_port(ref: str, path: str) -> tuple[str, str]:
    if ref.startswith("@"):
        if len(ref) < 2:
            raise GraphError(path, f"loop port {ref!r} has no name")
        return "@", ref[1:]
    node_name, sep, port = ref.partition(".")
    if not sep or not node_name or not port:
        raise GraphError(path, f"{ref!r} must look like 'node.port' or '@loop_port'")
    return node_name, port


@dataclass
class GraphDefinition:
    name: str
    nodesets: dict[str, NodesetDef]
    nodes: dict[str, NodeDef]
    edges: list[tuple[str, str]]
    loop: LoopDef

    # ---- (de)serialisation -------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any) -> GraphDefinition:
        """Parse the JSON form; structural type errors name the field."""
        _require(data, dict, "<root>")
        unknown = set(data) - {"name", "nodesets", "nodes", "edges", "loop"}
        if unknown:
            raise GraphError(sorted(unknown)[0], "unknown field")
        for key in ("name", "nodesets", "nodes", "edges", "loop"):
            if key not in data:
                raise GraphError(key, "field required")
        name = _require(data["name"], str, "name")
        if not name.strip():
            raise GraphError("name", "must not be empty")
        nodesets: dict[str, NodesetDef] = {}
        for ns_name, ns in _require(data["nodesets"], dict, "nodesets").items():
            path = f"nodesets.{ns_name}"
            _require(ns, dict, path)
            extra = set(ns) - {"impl", "parallelism", "params", "replicas", "min_replicas",
                               "environment"}
            if extra:
                raise GraphError(f"{path}.{sorted(extra)[0]}", "unknown field")
            if "impl" not in ns:
                raise GraphError(f"{path}.impl", "field required")
            par = ns.get("parallelism", "inline")
            if par not in PARALLELISMS:
                raise GraphError(f"{path}.parallelism", f"must be one of {list(PARALLELISMS)}")
            replicas, least = check_replicas(ns, par, path)
            nodesets[ns_name] = NodesetDef(
                impl=_require(ns["impl"], str, f"{path}.impl"),
                parallelism=par,
                params=dict(_require(ns.get("params", {}), dict, f"{path}.params")),
                replicas=replicas,
                min_replicas=least,
                environment=check_environment(ns, par, path),
            )
        nodes: dict[str, NodeDef] = {}
        for node_name, nd in _require(data["nodes"], dict, "nodes").items():
            path = f"nodes.{node_name}"
            _require(nd, dict, path)
            if "." in node_name or node_name.startswith("@"):
                raise GraphError(path, "node names may not contain '.' or start with '@'")
            for key in ("nodeset", "op"):
                if key not in nd:
                    raise GraphError(f"{path}.{key}", "field required")
            nodes[node_name] = NodeDef(
                nodeset=_require(nd["nodeset"], str, f"{path}.nodeset"),
                op=_require(nd["op"], str, f"{path}.op"),
            )
        edges: list[tuple[str, str]] = []
        for i, edge in enumerate(_require(data["edges"], list, "edges")):
            if not (isinstance(edge, list | tuple) and len(edge) == 2
                    and all(isinstance(e, str) for e in edge)):
                raise GraphError(f"edges[{i}]", "each edge is a pair [source, destination]")
            edges.append((edge[0], edge[1]))
        loop = _require(data["loop"], dict, "loop")
        for key in ("env", "step"):
            if key not in loop:
                raise GraphError(f"loop.{key}", "field required")
        return cls(
            name=name,
            nodesets=nodesets,
            nodes=nodes,
            edges=edges,
            loop=LoopDef(env=_require(loop["env"], str, "loop.env"),
                         step=_require(loop["step"], str, "loop.step")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodesets": {n: _nodeset_dict(ns) for n, ns in self.nodesets.items()},
            "nodes": {n: {"nodeset": nd.nodeset, "op": nd.op} for n, nd in self.nodes.items()},
            "edges": [list(e) for e in self.edges],
            "loop": {"env": self.loop.env, "step": self.loop.step},
        }

    # ---- selectors ----------------------------------------------------------------------
    def with_selectors(self, selectors: Mapping[str, Any]) -> GraphDefinition:
        """A copy with params overridden: ``{"policy.noise": 0.1}`` (nodeset or node name)."""
        graph = GraphDefinition.from_dict(self.to_dict())
        for key, value in selectors.items():
            target, sep, param = key.partition(".")
            if not sep or not param:
                raise GraphError(f"selectors.{key}", "must look like 'nodeset.param'")
            if target not in graph.nodesets and target in graph.nodes:
                target = graph.nodes[target].nodeset
            if target not in graph.nodesets:
                raise GraphError(f"selectors.{key}", f"no nodeset or node named {target!r}")
            graph.nodesets[target].params[param] = value
        return graph

    # ---- checking ----------------------------------------------------------------------
    def check(self, defer: Collection[str] = ()) -> dict[str, type[NodeSet]]:
        """Resolve every impl and check the DAG; returns the nodeset classes by name.

        ``defer``: nodesets whose own environment is not built yet (a scheduler builds it
        while the run waits): every other nodeset is resolved and checked, the DAG's order
        too, and the rest (their classes, the nodes' ports) once they are built."""
        classes: dict[str, type[NodeSet]] = {}
        for ns_name, ns in self.nodesets.items():
            if ns_name in defer:
                continue
            try:
                classes[ns_name] = import_impl(ns.impl) if ns.environment is None else \
                    foreign_class(ns_name, ns.impl, ns.environment,
                                  shared=ns.parallelism == "shared")
            except ImplError as exc:
                raise GraphError(f"nodesets.{ns_name}.impl", str(exc)) from None
            except ForeignRemoteError as exc:  # its module, in its environment
                raise GraphError(f"nodesets.{ns_name}.impl", exc.line) from None
            except ENVIRONMENT_ERRORS as exc:
                raise GraphError(f"nodesets.{ns_name}.environment", str(exc)) from None
            _check_params(classes[ns_name], ns.params, f"nodesets.{ns_name}.params")
            batching = classes[ns_name].batching_error()
            if batching is not None:
                raise GraphError(f"nodesets.{ns_name}.impl", f"{ns.impl}: {batching}")
        self._check_names()
        if defer:  # what needs no class: the names the graph refers to (above), the DAG
            self.topological_order()
            return classes
        specs = self._node_specs(classes)
        self._check_loop(classes, specs)
        self._check_edges(specs)
        self.topological_order()
        return classes

    def _check_names(self) -> None:
        """Every nodeset and node the nodes and the loop refer to exists."""
        for node_name, nd in self.nodes.items():
            if nd.nodeset not in self.nodesets:
                raise GraphError(f"nodes.{node_name}.nodeset", f"no nodeset named {nd.nodeset!r}")
        if self.loop.env not in self.nodesets:
            raise GraphError("loop.env", f"no nodeset named {self.loop.env!r}")
        if self.loop.step not in self.nodes:
            raise GraphError("loop.step", f"no node named {self.loop.step!r}")

    def _node_specs(self, classes: Mapping[str, type[NodeSet]]) -> dict[str, NodeSpec]:
        specs: dict[str, NodeSpec] = {}
        for node_name, nd in self.nodes.items():
            offered = classes[nd.nodeset].node_specs()
            if nd.op not in offered:
                raise GraphError(
                    f"nodes.{node_name}.op",
                    f"{self.nodesets[nd.nodeset].impl} has no node op {nd.op!r} "
                    f"(it offers {sorted(offered)})",
                )
            specs[node_name] = offered[nd.op]
        return specs

    def _check_loop(
        self, classes: Mapping[str, type[NodeSet]], specs: Mapping[str, NodeSpec]
    ) -> None:
        env = self.loop.env
        if not issubclass(classes[env], EnvNodeSet):
            raise GraphError("loop.env", f"{self.nodesets[env].impl} is not an EnvNodeSet")
        if self.nodesets[env].parallelism != "replicated":
            raise GraphError(f"nodesets.{env}.parallelism", "the env nodeset must be 'replicated'")
        step = self.loop.step
        if self.nodes[step].nodeset != env:
            raise GraphError("loop.step", f"node {step!r} is not an op of the env nodeset {env!r}")
        if "done" not in specs[step].outputs:
            raise GraphError("loop.step", f"step node {step!r} must have a 'done' output")

    def _check_edges(self, specs: Mapping[str, NodeSpec]) -> None:
        step_outputs = set(specs[self.loop.step].outputs)
        fed: dict[tuple[str, str], int] = {}
        for i, (src, dst) in enumerate(self.edges):
            s_node, s_port = split_port(src, f"edges[{i}][0]")
            if s_node == "@":
                if s_port not in step_outputs:
                    raise GraphError(f"edges[{i}][0]", f"loop port {src!r} is not an output of "
                                     f"the step node {self.loop.step!r} {sorted(step_outputs)}")
            elif s_node not in specs:
                raise GraphError(f"edges[{i}][0]", f"dangling edge: no node named {s_node!r}")
            elif s_port not in specs[s_node].outputs:
                raise GraphError(f"edges[{i}][0]", f"node {s_node!r} has no output {s_port!r} "
                                 f"(outputs: {list(specs[s_node].outputs)})")
            d_node, d_port = split_port(dst, f"edges[{i}][1]")
            if d_node == "@" or d_node not in specs:
                raise GraphError(f"edges[{i}][1]", f"dangling edge: no node named {d_node!r}")
            if d_port not in specs[d_node].inputs:
                raise GraphError(f"edges[{i}][1]", f"node {d_node!r} has no input {d_port!r} "
                                 f"(inputs: {list(specs[d_node].inputs)})")
            if (d_node, d_port) in fed:
                raise GraphError(f"edges[{i}][1]", f"input {dst!r} already fed by "
                                 f"edges[{fed[(d_node, d_port)]}]")
            fed[(d_node, d_port)] = i
        for node_name, spec in specs.items():
            for port in spec.inputs:
                if (node_name, port) not in fed:
                    raise GraphError(f"nodes.{node_name}", f"input port {port!r} has no edge")

    def topological_order(self) -> list[str]:
        """Node names in firing order (Kahn's algorithm; ties by declaration order)."""
        deps: dict[str, set[str]] = {n: set() for n in self.nodes}
        for src, dst in self.edges:
            s_node = src.partition(".")[0]
            d_node = dst.partition(".")[0]
            if not src.startswith("@") and s_node in deps and d_node in deps:
                deps[d_node].add(s_node)
        order: list[str] = []
        ready = [n for n in self.nodes if not deps[n]]
        while ready:
            current = ready.pop(0)
            order.append(current)
            for n in self.nodes:
                if current in deps[n]:
                    deps[n].discard(current)
                    if not deps[n] and n not in order and n not in ready:
                        ready.append(n)
        if len(order) != len(self.nodes):
            stuck = sorted(set(self.nodes) - set(order))
            raise GraphError("edges", f"cycle between nodes {stuck} (use @loop ports to feed "
                             "a value into the next step)")
        return order

    def resolved_params(self, classes: Mapping[str, type[NodeSet]]) -> dict[str, dict[str, Any]]:
        """Each nodeset's params with the constructor defaults filled in (for graph.json)."""
        out: dict[str, dict[str, Any]] = {}
        for ns_name, ns in self.nodesets.items():
            params: dict[str, Any] = {}
            for p in inspect.signature(classes[ns_name].__init__).parameters.values():
                if p.name != "self" and p.default is not inspect.Parameter.empty:
                    params[p.name] = p.default
            params.update(ns.params)
            out[ns_name] = params
        return out


def _nodeset_dict(ns: NodesetDef) -> dict[str, Any]:
    out: dict[str, Any] = {"impl": ns.impl, "parallelism": ns.parallelism,
                           "params": dict(ns.params)}
    if ns.replicas is not None:  # absent otherwise: graphs without replicas are unchanged
        out["replicas"] = ns.replicas
        out["min_replicas"] = ns.min_replicas
    if ns.environment is not None:
        out["environment"] = ns.environment.to_dict()
    return out


def check_environment(ns: Mapping[str, Any], parallelism: str, path: str
                      ) -> NodesetEnvironment | None:
    """A nodeset's ``environment`` (JSON form), checked: GraphError naming the key."""
    if "environment" not in ns:
        return None
    try:
        env = parse_environment(ns["environment"])
    except EnvironmentSpecError as exc:
        where = f".{exc.field}" if exc.field else ""
        raise GraphError(f"{path}.environment{where}", str(exc)) from None
    if parallelism == "inline":
        raise GraphError(f"{path}.environment", "an 'inline' nodeset runs inside each "
                         "worker's own process, so it cannot have its own environment: make "
                         "it 'replicated' (a host per worker) or 'shared' (one host)")
    return env


def check_replicas(ns: Mapping[str, Any], parallelism: str, path: str
                   ) -> tuple[int | str | None, int]:
    """A nodeset's ``replicas`` and ``min_replicas`` (JSON form), checked: GraphError."""
    replicas = ns.get("replicas")
    least = ns.get("min_replicas", 1)
    if replicas is None:
        if "min_replicas" in ns:
            raise GraphError(f"{path}.min_replicas", "needs replicas (N or \"per_gpu\")")
        return None, 1
    if replicas != PER_GPU and (not _is_int(replicas) or replicas < 1):
        raise GraphError(f"{path}.replicas",
                         f"must be an integer >= 1 or \"per_gpu\", got {replicas!r}")
    if not _is_int(least) or least < 1:
        raise GraphError(f"{path}.min_replicas", f"must be an integer >= 1, got {least!r}")
    if _is_int(replicas) and least > replicas:
        raise GraphError(f"{path}.min_replicas",
                         f"{least} is more than replicas ({replicas})")
    if parallelism != "shared":
        raise GraphError(f"{path}.replicas", "only a 'shared' nodeset has replicas "
                         f"(this one is {parallelism!r})")
    return replicas, least


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_params(cls: type[NodeSet], params: Mapping[str, Any], path: str) -> None:
    sig = inspect.signature(cls.__init__)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    if accepts_any:
        return
    known = {n for n in sig.parameters if n != "self"}
    for key in params:
        if key not in known:
            raise GraphError(f"{path}.{key}", f"{cls.__name__} takes no parameter {key!r} "
                             f"(it takes {sorted(known)})")
