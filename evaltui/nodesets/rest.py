"""``JsonNumpyPolicy``: a policy behind a REST ``POST /act`` json-numpy server (OpenVLA's
``deploy.py`` dialect), as a nodeset.

The request body is JSON with numpy values written the way the ``json_numpy`` package
writes them (``{"__numpy__": base64 bytes, "dtype": numpy descr, "shape": [...]}``; a
shape ``[]`` is a scalar); the reply is the action itself, so encoded (``action_key``
reads it from a map instead). A reply that is itself a JSON string is decoded again
(``deploy.py``'s "double-encoded" form); the string ``"error"`` (what ``deploy.py``
answers when the policy raised) or any HTTP error status ends the episode ``error``. The
params are those of :class:`~evaltui.nodesets.remotepolicy.RemotePolicy` plus ``url``
(``http://host:port/act``), ``extra`` (constant fields every request carries, e.g.
``{"unnorm_key": "bridge_orig"}``) and ``timeout_s`` (no answer by then: ``timeout``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Annotated, Any

import httpx
import numpy as np
from numpy.lib.format import descr_to_dtype, dtype_to_descr
from pydantic import Field

from evaltui.engine.episode.loop import StepTimeout
from evaltui.engine.hosting.openpiwire import error_line
from evaltui.nodesets.remotepolicy import PolicyServerError, RemotePolicy


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray | np.generic):
        if obj.dtype.hasobject:
            raise TypeError(f"cannot send a numpy array of dtype {obj.dtype}")
        arr = np.ascontiguousarray(obj)
        return {"__numpy__": base64.b64encode(arr.tobytes()).decode(),
                "dtype": dtype_to_descr(arr.dtype), "shape": list(arr.shape)}
    raise TypeError(f"cannot send a value of type {type(obj).__name__}")


def _decode(obj: dict[str, Any]) -> Any:
    if "__numpy__" not in obj:
        return obj
    missing = [k for k in ("dtype", "shape") if k not in obj]
    if missing:
        raise ValueError(f"a __numpy__ value has no {', '.join(missing)}")
    dtype = descr_to_dtype(obj["dtype"])
    if dtype.hasobject:
        raise ValueError(f"refused dtype {dtype} (no pickle)")
    flat = np.frombuffer(base64.b64decode(obj["__numpy__"]), dtype=dtype)
    shape = list(obj["shape"])
    return flat.reshape(shape).copy() if shape else flat[0]


def dumps(value: Any) -> str:
    """``value`` as json-numpy text."""
    return json.dumps(value, default=_encode)


def loads(text: str | bytes) -> Any:
    """json-numpy text back to Python values (arrays as numpy arrays)."""
    return json.loads(text, object_hook=_decode)


class JsonNumpyPolicy(RemotePolicy):
    """A policy served at ``POST url`` in json-numpy; see the module docstring."""

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        """At spec check: something answers HTTP at ``url`` before anything runs."""
        url = str(params.get("url") or "")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url: must start with http:// or https://, got {url!r}")
        try:
            httpx.get(url, timeout=5.0)
        except httpx.HTTPError as exc:
            raise ValueError(f"url: cannot reach the policy server at {url}: {exc}") from None

    def __init__(self, url: str, obs_keys: dict[str, str] | None = None,
                 action_key: str | None = None,
                 replan_every: Annotated[int, Field(ge=1)] | None = None,
                 extra: dict[str, Any] | None = None,
                 timeout_s: Annotated[float, Field(gt=0)] = 60.0) -> None:
        self.url = url
        self.setup(obs_keys, action_key, replan_every)
        self.extra = dict(extra or {})
        self.timeout_s = timeout_s
        self._http = httpx.Client(timeout=timeout_s)

    def ask(self, request: Mapping[str, Any]) -> Any:
        body = dumps({**request, **self.extra})
        try:
            response = self._http.post(self.url, content=body,
                                       headers={"Content-Type": "application/json"})
        except httpx.TimeoutException:
            raise StepTimeout(f"policy server at {self.url} sent no reply within "
                              f"timeout_s {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise PolicyServerError(f"policy server at {self.url}: {exc}") from None
        if response.status_code != 200:
            raise PolicyServerError(f"policy server at {self.url} answered HTTP "
                                    f"{response.status_code}: {error_line(response.text)}")
        try:
            reply = loads(response.content)
            if isinstance(reply, str) and reply != "error":
                reply = loads(reply)  # deploy.py's double-encoded reply
        except ValueError as exc:
            raise PolicyServerError(f"policy server at {self.url}: not json-numpy: {exc}"
                                    ) from None
        if isinstance(reply, str):
            raise PolicyServerError(f"policy server error: {error_line(reply)}")
        return reply

    def close(self) -> None:
        super().close()
        self._http.close()
