"""``JsonNumpyPolicy`` (evaltui.nodesets.rest) against a ``POST /act`` json-numpy server
written here from OpenVLA's ``deploy.py`` protocol, serving the shipped BabyAI model."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from policyhelpers import run, same, spec
from ports import free_port
from runhelpers import episode_rows

from evaltui.benchmarks.babyai.model import BabyAIModelPolicy
from evaltui.nodesets.rest import JsonNumpyPolicy

REST = {"impl": "evaltui.nodesets.rest:JsonNumpyPolicy", "parallelism": "replicated"}


def hook(d: dict[str, Any]) -> Any:  # json_numpy's format: base64 bytes, descr, shape
    if "__numpy__" in d:
        arr = np.frombuffer(base64.b64decode(d["__numpy__"]), np.lib.format.descr_to_dtype(
            d["dtype"]))
        return arr.reshape(d["shape"]) if d["shape"] else arr[0]
    return d


def encode(o: Any) -> Any:
    return {"__numpy__": base64.b64encode(np.ascontiguousarray(o).tobytes()).decode(),
            "dtype": np.lib.format.dtype_to_descr(o.dtype), "shape": list(np.shape(o))}


@contextmanager
def deploy_server(mode: str = "ok") -> Iterator[str]:
    """deploy.py's shape: POST /act, json-numpy body with image + instruction, the
    action itself as the reply; "error" when the policy raised."""
    model = BabyAIModelPolicy()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()

        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])),
                                 object_hook=hook)
            if mode == "error":
                body = json.dumps("error")
            else:
                obs = {"image": payload["image"][None], "direction": np.array([payload["dir"]]),
                       "mission": np.array([payload["instruction"]])}
                body = json.dumps(model.act(obs)["action"][0], default=encode)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/act"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


MAPPING = {"obs/image": "image", "obs/direction": "dir", "obs/mission": "instruction"}


def rest_spec(url: str, workers: int, episodes: int | None = None) -> dict[str, Any]:
    data = spec("model", workers, **({"episodes": episodes} if episodes else {}))
    data["graph"]["nodesets"]["policy"] = {**REST, "params": {"url": url, "obs_keys": MAPPING,
                                                              "extra": {"unnorm_key": "x"}}}
    return data


def test_rows_through_a_deploy_server_equal_the_in_process_model(
        tmp_path: Path, in_process: list[dict[str, Any]]) -> None:
    with deploy_server() as url:
        run_dir = run(rest_spec(url, 2), tmp_path)
    assert same(episode_rows(run_dir)) == in_process


def test_an_error_reply_ends_the_episode_as_error(tmp_path: Path) -> None:
    with deploy_server("error") as url:
        run_dir = run(rest_spec(url, 1, episodes=1), tmp_path)
    [row] = episode_rows(run_dir)
    assert row["status"] == "error" and "policy server error: error" in row["error"]


def test_an_absent_server_is_refused_at_check() -> None:
    url = f"http://127.0.0.1:{free_port()}/act"
    with pytest.raises(ValueError, match="url: cannot reach the policy server"):
        JsonNumpyPolicy.check_params({"url": url})
