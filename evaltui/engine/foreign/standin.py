"""A nodeset class that lives in another environment, as evaltui's side sees it.

:func:`foreign_class` asks the other interpreter what the class is (its nodes, whether it
is an env, its constructor's params) and makes a stand-in NodeSet subclass from the answer:
graph checking, the loop and the hosts use it as they use any nodeset class. Building an
instance starts one host in the other environment (:class:`.hostproc.ForeignHost`); its
``call`` / ``set_episode`` / ``begin_episode`` / ``trajectory`` cross to it. So a
replicated nodeset gets one host per worker, and a shared one is hosted by evaltui's host
(batching as ever) in front of one host in its environment.

The class pickles as what makes it, its environment included, and finds its interpreter
again wherever it is unpickled (:func:`_stand_in_here`): in a local worker that is the same
one; in a Ray actor on another node, an environment evaltui builds is built there, into
that node's cache (``EVALTUI_ENV_CACHE`` of its raylet), and an interpreter or launcher
given by path must exist there.

A host that died is started again at the next episode's ``set_episode`` /
``begin_episode`` (the episode it died in fails, and is retried per
``max_episode_retries``); a shared nodeset's host, which keeps no episode, at the next call.
"""

from __future__ import annotations

import copyreg
import inspect
import os
from abc import ABCMeta
from typing import Any, ClassVar

from evaltui.engine.foreign.envcache import EnvBuildError
from evaltui.engine.foreign.envspec import NodesetEnvironment, parse_environment
from evaltui.engine.foreign.hostproc import (
    ForeignHost,
    ForeignHostError,
    ForeignRemoteError,
    describe_class,
)
from evaltui.engine.foreign.interpreter import InterpreterMissing, interpreter_argv
from evaltui.engine.nodes import EnvNodeSet, NodeSet, NodeSpec
from evaltui.engine.usererrors import NodesetConstructorError

ENVIRONMENT_ERRORS = (ForeignHostError, InterpreterMissing, EnvBuildError)
"""What can go wrong with a nodeset's environment itself (not with its module)."""

_described: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}


class ForeignNodeset:
    """The behaviour of every stand-in class (mixed in before NodeSet / EnvNodeSet)."""

    foreign_argv: ClassVar[list[str]]
    foreign_impl: ClassVar[str]
    foreign_label: ClassVar[str]
    foreign_restart_on_call: ClassVar[bool]
    foreign_info: ClassVar[dict[str, Any]]
    foreign_environment: ClassVar[dict[str, Any]]

    def __init__(self, **params: Any) -> None:
        self._params = params
        self._host: ForeignHost | None = None
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        host = ForeignHost(self.foreign_argv, self.foreign_impl, self.foreign_label)
        try:
            host.start("host", params=self._params)
        except ForeignRemoteError as exc:
            host.stop()
            raise NodesetConstructorError(
                f"{self.foreign_label} ({type(self).__name__}) failed to build in its own "
                f"environment: {exc.line}", str(exc)) from None
        self._host = host

    @property
    def host_pid(self) -> int | None:
        return None if self._host is None else self._host.pid

    def _request(self, kind: str, name: str, payload: Any, *, restart: bool = False) -> Any:
        if restart and (self._host is None or not self._host.alive()):
            if self._host is not None:
                self._host.stop(grace_sec=0.5)
            self.restarts += 1
            self._start()
        if self._host is None:
            raise ForeignHostError(f"{self.foreign_label} is closed")
        return self._host.request(kind, name, payload)

    def call(self, op: str, inputs: Any) -> dict[str, Any]:
        return self._request("call", op, dict(inputs),  # type: ignore[no-any-return]
                             restart=self.foreign_restart_on_call)

    def set_episode(self, episode: Any) -> dict[str, Any]:
        return self._request("method", "set_episode", [dict(episode)],  # type: ignore[no-any-return]
                             restart=True)

    def begin_episode(self, episode: Any) -> None:
        self._request("method", "begin_episode", [dict(episode)], restart=True)

    def trajectory(self) -> Any:
        return self._request("method", "trajectory", [])

    def close(self) -> None:
        if self._host is not None:
            self._host.stop()
            self._host = None

    @classmethod
    def step_limits(cls, episodes: list[Any]) -> list[int | None]:
        """The env's own step limit of each episode (one call into its environment)."""
        if not cls.foreign_info.get("has_step_limit"):
            return [None] * len(episodes)
        info = describe_class(cls.foreign_argv, cls.foreign_impl, cls.foreign_label,
                              episodes=[dict(ep) for ep in episodes])
        return list(info.get("step_limits") or [None] * len(episodes))


def describe(argv: list[str], impl: str, label: str) -> dict[str, Any]:
    """The class's description from its interpreter (once per process and interpreter)."""
    key = (tuple(argv), impl)
    if key not in _described:
        _described[key] = describe_class(argv, impl, label)
    return _described[key]


def foreign_class(name: str, impl: str, env: NodesetEnvironment, *,
                  shared: bool = False) -> type[NodeSet]:
    """The stand-in class of ``impl`` in ``env`` (ForeignHostError, ForeignRemoteError:
    ImplError's one line from the other side, InterpreterMissing, EnvBuildError)."""
    label = f"nodeset {name!r}"
    argv = interpreter_argv(env, label)
    return _stand_in(label, impl, tuple(argv), shared, describe(argv, impl, label),
                     env.to_dict())


class ForeignNodesetMeta(ABCMeta):
    """The stand-in classes' type: pickled by what makes them (the worker config crosses
    to the zygote pickled; the user's module may not import on this side at all)."""


_made: dict[tuple[str, str, tuple[str, ...], bool], type[NodeSet]] = {}


def _stand_in(label: str, impl: str, argv: tuple[str, ...], shared: bool,
              info: dict[str, Any], environment: dict[str, Any]) -> type[NodeSet]:
    key = (label, impl, argv, shared)
    if key in _made:
        return _made[key]
    base: type[NodeSet] = EnvNodeSet if info["is_env"] else NodeSet

    def __init__(self: ForeignNodeset, **params: Any) -> None:
        ForeignNodeset.__init__(self, **params)

    __init__.__signature__ = _signature(info["params"])  # type: ignore[attr-defined]
    attrs: dict[str, Any] = {
        "__module__": info["module"], "__qualname__": info["qualname"], "__init__": __init__,
        "foreign_argv": list(argv), "foreign_impl": impl, "foreign_label": label,
        "foreign_restart_on_call": shared, "foreign_info": info,
        "foreign_environment": environment, "success_distance": info["success_distance"],
    }
    for op, (inputs, outputs, batched, batch_dim) in info["node_specs"].items():
        attrs[op] = _node_stub(NodeSpec(op, tuple(inputs), tuple(outputs), batched, batch_dim))
    cls = ForeignNodesetMeta(info["qualname"].rpartition(".")[2], (ForeignNodeset, base), attrs)
    cls._batching_error = info["batching_error"]
    _made[key] = cls
    return cls


def _stand_in_here(label: str, impl: str, argv: tuple[str, ...], shared: bool,
                   info: dict[str, Any], environment: dict[str, Any]) -> type[NodeSet]:
    """The stand-in class unpickled: its interpreter as found on this machine (the same
    where the spec was checked; on a Ray node, built into the node's cache if it lacks it:
    InterpreterMissing, EnvBuildError, EnvironmentSpecError say why not)."""
    env = parse_environment(environment)
    if env.built or not os.path.exists(argv[0]):
        argv = tuple(interpreter_argv(env, label))
    return _stand_in(label, impl, argv, shared, info, environment)


def _reduce_class(cls: Any) -> tuple[Any, tuple[Any, ...]]:
    return _stand_in_here, (cls.foreign_label, cls.foreign_impl, tuple(cls.foreign_argv),
                            cls.foreign_restart_on_call, cls.foreign_info,
                            cls.foreign_environment)


copyreg.pickle(ForeignNodesetMeta, _reduce_class)


def _node_stub(spec: NodeSpec) -> Any:
    def stub(self: ForeignNodeset, **inputs: Any) -> dict[str, Any]:
        return self.call(spec.op, inputs)

    stub.__name__ = spec.op
    stub.__evaltui_node__ = spec  # type: ignore[attr-defined]
    return stub


def _signature(params: list[list[Any]]) -> inspect.Signature:
    """The constructor's signature as the other side saw it (defaults that are JSON)."""
    out = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for pname, kind, has_default, default in params:
        out.append(inspect.Parameter(pname, inspect.Parameter.POSITIONAL_OR_KEYWORD
                                     if kind in (0, 1) else inspect._ParameterKind(kind),
                                     default=default if has_default else
                                     inspect.Parameter.empty))
    return inspect.Signature(out)
