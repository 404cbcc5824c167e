"""Property-based fuzz of the API from its own OpenAPI schema: no request gets a 5xx.

For every path and method of ``/openapi.json``, hypothesis draws path parameters (valid
run ids, traversal strings, very long and unicode strings, out-of-range integers), query
parameters from their schemas (or garbage), and JSON bodies built from the request schema
(or arbitrary JSON), and sends them to a real uvicorn over a real scheduler.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any
from urllib.parse import quote

import httpx
import hypothesis.strategies as st
from apihelpers import Backend, bot_spec
from hypothesis import HealthCheck, given, settings

from evaltui.contract.states import RunState

EXAMPLES_PER_ROUTE = 50
"""Per route that takes anything (24 routes: ~1,200 requests in all, with the 5 of each
route that takes nothing). 100 (hypothesis' default) took twice as long, ~23 s on CI,
the slowest API test but the soak."""
NASTY = ["..", "../..", "../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "%2e%2e%2f", "/", "%00",
         "\x00", "a" * 3000, "ep0000", "0", "-1", "1e9", "💥", "ﾃｽﾄ", "20250101_000000",
         "20250101_000000_" + "9" * 300, "%", "?", "#", "\\", "null", "[]", "{}", " "]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12)


def from_schema(schema: dict[str, Any], components: dict[str, Any], depth: int = 0
                ) -> st.SearchStrategy[Any]:
    """Mostly-valid JSON for a schema, with wrong types and extra keys mixed in."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return from_schema(components[name], components, depth)
    if depth > 4:
        return JSON
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return st.one_of([from_schema(o, components, depth + 1) for o in options])
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | st.text(max_size=8)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: from_schema(v, components, depth + 1) for k, v in props.items()
             if k in required},
            optional={**{k: from_schema(v, components, depth + 1) for k, v in props.items()
                         if k not in required},
                      "unexpected": JSON}) | JSON
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), components, depth + 1), max_size=3)
    if kind == "integer":
        return st.integers() | st.integers(min_value=-3, max_value=300)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False) | st.integers()
    if kind == "string":
        return st.text(max_size=40) | st.sampled_from(NASTY)
    if kind == "boolean":
        return st.booleans() | st.sampled_from(["yes", "0", ""])
    return JSON


def param_value(schema: dict[str, Any], components: dict[str, Any], known: list[str]
                ) -> st.SearchStrategy[str]:
    """A path or query value as text (what goes on the wire)."""
    typed = from_schema(schema, components).map(
        lambda v: str(v).lower() if isinstance(v, bool) else str(v))
    return typed | st.sampled_from(NASTY + known) | st.text(min_size=1, max_size=60)


def mutated_specs() -> st.SearchStrategy[dict[str, Any]]:
    """The bot's valid spec with one leaf or key replaced: deep into graph validation."""
    base = bot_spec(1)
    leaves = list(_leaf_paths(base))
    return st.builds(_mutate, st.just(base), st.sampled_from(leaves),
                     JSON | st.sampled_from(NASTY), st.booleans())


def _leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Any:
    if isinstance(value, dict):
        for k, v in value.items():
            yield prefix + (k,)
            yield from _leaf_paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield prefix + (i,)
            yield from _leaf_paths(v, prefix + (i,))


def _mutate(base: dict[str, Any], path: tuple[Any, ...], new: Any, rename: bool
            ) -> dict[str, Any]:
    spec = copy.deepcopy(base)
    parent = spec
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if rename and isinstance(parent, dict):
        parent[str(new)[:20]] = parent.pop(last)
    else:
        parent[last] = new
    return spec


def test_no_request_gets_a_5xx(make_backend) -> None:
    fuzzing = threading.Event()
    # Nothing fuzzed is ever admitted (a mutated spec may well be valid and long).
    backend = make_backend(lock_check=lambda: "fuzzing" if fuzzing.is_set() else None)
    http = backend.http()
    done = http.post("/runs", json=bot_spec(1)).json()["run_id"]
    assert backend.scheduler.wait(done, timeout=30) is RunState.DONE
    fuzzing.set()
    schema = backend.server.app.openapi()
    components = schema.get("components", {}).get("schemas", {})
    known = [done, "0", "1"]
    failures: list[str] = []
    sent = 0
    started = time.monotonic()
    def checker(method: str, strategy: st.SearchStrategy[dict[str, Any]], examples: int) -> Any:
        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(request=strategy)
        def check(request: dict[str, Any]) -> None:
            nonlocal sent
            status = _send(backend, http, method, request)
            sent += 1
            if status >= 500:
                failures.append(f"{method.upper()} {request} -> {status}")

        return check

    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            # A route that takes nothing (GET /queue) has nothing to vary: a few suffice.
            takes = op.get("parameters") or (method != "get" and "requestBody" in op)
            checker(method, _request(path, op, components, known),
                    EXAMPLES_PER_ROUTE if takes else 5)()
    assert not failures, "\n".join(failures[:20])
    assert sent >= 15 * EXAMPLES_PER_ROUTE
    print(f"fuzz: {sent} requests in {time.monotonic() - started:.1f} s, no 5xx")


def _request(path: str, op: dict[str, Any], components: dict[str, Any], known: list[str]
             ) -> st.SearchStrategy[dict[str, Any]]:
    path_params, query = {}, {}
    for param in op.get("parameters", []):
        value = param_value(param.get("schema", {}), components, known)
        if param["in"] == "path":
            path_params[param["name"]] = value
        elif param["in"] == "query":
            query[param["name"]] = value
    body_schema = (op.get("requestBody", {}).get("content", {})
                   .get("application/json", {}).get("schema"))
    body = from_schema(body_schema, components) if body_schema else st.none() | JSON
    if path.endswith("/runs") and "requestBody" in op:
        body = body | mutated_specs()
    return st.fixed_dictionaries({
        "path": st.fixed_dictionaries(path_params).map(
            lambda values: _fill(path, values)),
        "query": st.fixed_dictionaries({}, optional=query),
        "body": body,
    })


def _fill(path: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        # Escaped like a client would, so the value stays one segment; "%2F" still decodes
        # to "/" on the server side: that is the traversal being tried.
        path = path.replace("{" + name + "}", quote(value, safe="") or "%20")
    return path


def _send(backend: Backend, http: httpx.Client, method: str, request: dict[str, Any]) -> int:
    url = backend.url + request["path"]
    kwargs: dict[str, Any] = {"params": request["query"]}
    if method in ("post", "put", "patch", "delete") and request["body"] is not None:
        kwargs["json"] = request["body"]
    if request["path"].endswith("/events"):
        with http.stream(method.upper(), url, **kwargs) as response:
            return response.status_code  # an open stream: the status is what matters
    return http.request(method.upper(), url, **kwargs).status_code
