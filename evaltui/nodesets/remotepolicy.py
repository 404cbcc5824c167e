"""``RemotePolicy``: what every client of a policy served elsewhere does, whatever the wire.

The node is ``act(obs) -> action``. The request is built from the node's inputs through
``obs_keys`` (paths into the inputs, ``obs/image``, onto the server's keys, ``/``
nesting: ``observation/image``; default: the inputs as they are, ``{"obs": {...}}``); the
action is read from the reply at ``action_key`` (``/`` nests; None: the reply is the
action itself); with ``replan_every`` the reply is a chunk ``[H, ...]`` whose first
``min(replan_every, H)`` actions are executed one per step before the server is asked
again. Every round trip is timed into the run dir (:mod:`.serverrecord`). A subclass
says how one request travels (:meth:`RemotePolicy.ask`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from evaltui.engine.hosting import openpiwire as wire
from evaltui.engine.nodes import NodeSet, node
from evaltui.nodesets.serverrecord import LatencySamples


class PolicyServerError(RuntimeError):
    """The policy server failed a request (its message is one line)."""


class RemotePolicy(NodeSet):
    """The shared half of the client nodesets; see the module docstring."""

    url: str = ""

    def setup(self, obs_keys: Mapping[str, str] | None, action_key: str | None,
              replan_every: int | None) -> None:
        self.obs_keys = dict(obs_keys) if obs_keys else None
        self.action_key = action_key
        self.replan_every = replan_every
        self.latency = LatencySamples()
        self._chunk: list[Any] = []

    def ask(self, request: Mapping[str, Any]) -> Any:
        """Send one request, return the decoded reply (raise PolicyServerError or
        StepTimeout)."""
        raise NotImplementedError

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Any) -> dict[str, Any]:
        if not self._chunk:
            started = time.perf_counter()
            reply = self.ask(self.request({"obs": obs}))
            self.latency.add((time.perf_counter() - started) * 1e3)
            action = self.action_of(reply)
            if self.replan_every is None:
                return {"action": action}
            chunk = np.asarray(action)
            if chunk.ndim < 1 or len(chunk) == 0:
                raise PolicyServerError(f"policy server reply {self.action_key!r} is not a "
                                        f"chunk of actions [H, ...]: shape {chunk.shape}")
            self._chunk = list(chunk[:self.replan_every])
        return {"action": self._chunk.pop(0)}

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        self._chunk = []
        self.latency.save()

    def close(self) -> None:
        self.latency.save()

    def request(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if self.obs_keys is None:
            return dict(inputs)
        request: dict[str, Any] = {}
        for port_path, server_key in self.obs_keys.items():
            try:
                value = wire.get_path(inputs, port_path)
            except KeyError as exc:
                raise PolicyServerError(f"obs_keys {port_path!r}: the node's inputs have "
                                        f"{exc.args[0]}") from None
            wire.set_path(request, server_key, value)
        return request

    def action_of(self, reply: Any) -> Any:
        if self.action_key is None:
            return reply
        if not isinstance(reply, Mapping):
            raise PolicyServerError(f"policy server at {self.url} replied a "
                                    f"{type(reply).__name__}, not a map")
        try:
            return wire.get_path(reply, self.action_key)
        except KeyError as exc:
            raise PolicyServerError(f"policy server reply: action_key {self.action_key!r}: "
                                    f"{exc.args[0]}") from None
