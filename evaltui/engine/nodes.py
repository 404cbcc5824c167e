"""Nodesets and nodes: the user-facing API for writing graph parts.

A nodeset is a class that groups node operations hosted together (an environment, a
policy model, a tokenizer ...). Each node operation is a method decorated with
:func:`node`, which declares its input and output ports::

    class Policy(NodeSet):
        def __init__(self, noise: float = 0.0) -> None:
            self.noise = noise

        @node(inputs=("obs",), outputs=("action",))
        def act(self, obs):
            return {"action": 2}

A node returns a dict with exactly its declared outputs. ``batched=True`` with
``batch_dim="<input port>"`` marks a node that the BatchedInferenceServer may call with
stacked inputs (DESIGN §5). The same can be declared once for the whole nodeset, as
class variables::

    class BatchedPolicy(NodeSet):
        batched: ClassVar[bool] = True
        batch_dim: ClassVar[str] = "obs"

which batches every node of the class that has an ``obs`` input (as if each were
decorated ``@node(..., batched=True, batch_dim="obs")``); a node decorated with its own
``batched=True`` keeps its own ``batch_dim``.

An :class:`EnvNodeSet` is also the episode's environment: the LoopRunner calls
``set_episode`` at the start of each episode and ``trajectory`` at its end.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from evaltui.engine.usererrors import one_line, report_traceback

Parallelism = Literal["replicated", "shared", "inline"]


@dataclass(frozen=True)
class NodeSpec:
    """The declared shape of one node operation."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    batched: bool = False
    batch_dim: str | None = None


def node(
    *,
    inputs: tuple[str, ...] | list[str] = (),
    outputs: tuple[str, ...] | list[str] = (),
    batched: bool = False,
    batch_dim: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a nodeset method as a node operation with the given ports."""
    if batched and batch_dim not in inputs:
        raise ValueError(f"batch_dim {batch_dim!r} must be one of the inputs {list(inputs)}")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__evaltui_node__ = NodeSpec(  # type: ignore[attr-defined]
            op=fn.__name__,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            batched=batched,
            batch_dim=batch_dim,
        )
        return fn

    return mark


def _class_batching(cls: type, specs: dict[str, NodeSpec]
                    ) -> tuple[dict[str, NodeSpec], str | None]:
    """Apply the ClassVar form ``batched = True; batch_dim = "port"`` to ``specs``.

    Returns the specs (nodes with a ``batch_dim`` input become batched on it) and an
    error message when the declaration cannot be honoured.
    """
    batched = getattr(cls, "batched", False)
    if batched is False or batched is None or callable(batched) or isinstance(batched, property):
        return specs, None  # not declared, switched off by a subclass, or a method's name
    name = cls.__qualname__
    if batched is not True:
        return specs, (f"{name}.batched must be a bool (batched: ClassVar[bool] = True), "
                       f"got {batched!r}")
    batch_dim = getattr(cls, "batch_dim", None)
    if not isinstance(batch_dim, str) or not batch_dim:
        return specs, (f"{name} declares batched = True but no batch_dim: add "
                       "batch_dim: ClassVar[str] = \"<input port>\"")
    out = {op: NodeSpec(s.op, s.inputs, s.outputs, batched=True, batch_dim=batch_dim)
           if not s.batched and batch_dim in s.inputs else s for op, s in specs.items()}
    if not any(batch_dim in s.inputs for s in specs.values()):
        ports = sorted({p for s in specs.values() for p in s.inputs})
        return out, (f"{name} declares batch_dim = {batch_dim!r}, but none of its nodes "
                     f"has an input {batch_dim!r} (inputs: {ports})")
    return out, None


class NodeSet:
    """Base class of every nodeset. Constructor keyword arguments are the nodeset params."""

    _node_specs: ClassVar[dict[str, NodeSpec]]
    _batching_error: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs: dict[str, NodeSpec] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                spec = getattr(value, "__evaltui_node__", None)
                if isinstance(spec, NodeSpec):
                    specs[name] = spec
        cls._node_specs, cls._batching_error = _class_batching(cls, specs)

    @classmethod
    def batching_error(cls) -> str | None:
        """Why the class-level ``batched``/``batch_dim`` declaration is wrong (None: fine).

        Reported by :meth:`GraphDefinition.check`, not at class creation, so that a
        wrong declaration is a graph error of the spec naming the class, not an import
        failure.
        """
        return cls._batching_error

    @classmethod
    def node_specs(cls) -> Mapping[str, NodeSpec]:
        """The node operations this nodeset offers, by op name."""
        return dict(getattr(cls, "_node_specs", {}))

    def call(self, op: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Fire one node operation; the single entry point used by local and remote hosts."""
        result = getattr(self, op)(**inputs)
        if not isinstance(result, Mapping):
            raise TypeError(f"node {type(self).__name__}.{op} returned {type(result).__name__}, "
                            "expected a dict of its outputs")
        return dict(result)

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        """Called on replicated and inline nodesets before each episode (after the env reset).

        Stateful per-episode nodesets (a planner, a recurrent policy) reset here; the
        default keeps no per-episode state.
        """

    def close(self) -> None:
        """Release resources (simulators, models). Called once when the host stops."""


@dataclass
class Trajectory:
    """What an env reports at the end of an episode, for the metrics (DESIGN §9).

    ``positions`` are the agent positions, appended when they change, starting with the
    start position. ``nav_error`` is the final geodesic distance to the goal.
    """

    positions: list[tuple[float, ...]]
    success: bool
    nav_error: float
    extra: dict[str, float] = field(default_factory=dict)


class EnvNodeSet(NodeSet, ABC):
    """A nodeset that is also the episode's environment (``parallelism = "replicated"``).

    Subclasses declare a step node (e.g. ``@node(inputs=("action",), outputs=("obs",
    "done"))``) and implement the two hooks below. ``success_distance`` is d_th of nDTW.
    """

    success_distance: ClassVar[float] = 1.0

    @abstractmethod
    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        """Reset to the given dataset episode.

        Returns the initial values of the loop ports (e.g. ``{"obs": ..., "frame": ...}``).
        Graph edges read them as ``@obs``; the step node's outputs of the same names
        replace them after every step, and its ``done`` output ends the episode.
        """

    @abstractmethod
    def trajectory(self) -> Trajectory:
        """The finished (or interrupted) episode's trajectory, for the metrics."""

    @classmethod
    def step_limit(cls, episode: Mapping[str, Any]) -> int | None:
        """The env's own step limit for ``episode`` (None: it declares none).

        The run's ``step_budget`` defaults to the largest limit over its episodes, so an
        episode is never cut before the benchmark itself would end it.
        """
        return None


class ImplError(ValueError):
    """A nodeset ``impl`` string could not be resolved to a NodeSet class."""


def import_impl(impl: str) -> type[NodeSet]:
    """Resolve ``"package.module:Class"`` to a NodeSet subclass, with a clear error."""
    module_name, sep, attr = impl.partition(":")
    if not sep or not module_name or not attr:
        raise ImplError(f"impl {impl!r} must look like 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name and not module_name.startswith(f"{exc.name}."):
            raise _import_failed(impl, module_name, exc) from exc  # an import of theirs
        raise ImplError(f"impl {impl!r}: cannot import module {module_name!r}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # a SyntaxError, anything raised at import
        # (SystemExit: a script's top-level sys.exit() or argparse, missing its main guard)
        raise _import_failed(impl, module_name, exc) from exc
    cls = getattr(module, attr, None)
    if cls is None:
        raise ImplError(f"impl {impl!r}: module {module_name!r} has no attribute {attr!r}")
    if not (isinstance(cls, type) and issubclass(cls, NodeSet)):
        raise ImplError(f"impl {impl!r} is not a NodeSet subclass")
    return cls


def _import_failed(impl: str, module_name: str, exc: BaseException) -> ImplError:
    """One line: where in the user's module it failed, the exception and its message."""
    report_traceback(exc)
    return ImplError(f"impl {impl!r}: cannot import module {module_name!r}: {one_line(exc)} "
                     "(--verbose prints the traceback)")


@dataclass(frozen=True)
class Frame:
    """An image (H x W x 3 uint8 array) that the ExecutionLogger saves as a PNG in assets/.

    Any node output or loop port may carry a Frame; the log records its relative path.
    ``video``: the episode's frames of this kind are encoded into one ``video.mp4`` in the
    episode dir instead (H.264, needs PyAV; evaltui.engine.episode.videowriter), the log
    recording the frame's index in it.
    """

    pixels: Any
    video: bool = False
