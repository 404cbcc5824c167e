"""``evaltui serve-policy``: the real ``openpi-client`` (PyPI, in a second environment with
numpy<2) and evaltui's own client nodeset against it; batching across connections; its
faults, each one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from policyhelpers import EPISODES, HERE, run, same, serve_policy, spec, stats
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from evaltui.benchmarks.babyai import load_manifest
from evaltui.benchmarks.babyai.env import BabyAIEnv
from evaltui.benchmarks.babyai.model import BabyAIModelPolicy
from evaltui.engine.hosting import openpiwire as wire
from evaltui.engine.hosting.stacking import BatchOfOne
from evaltui.nodesets.openpi import WebsocketPolicy


@pytest.fixture(scope="module")
def observations() -> list[dict[str, Any]]:
    """Real observations: the first steps of 24 GoToLocal episodes under a fixed walk."""
    env = BabyAIEnv(frame_stride=0)
    out = []
    try:
        for episode in load_manifest("GoToLocal", limit=24):
            out.append(env.set_episode(episode)["obs"])
            for action in (1, 2, 2, 0):
                step = env.call("step", {"action": action})
                out.append(step["obs"])
                if step["done"]:
                    break
    finally:
        env.close()
    return out


def model_actions(observations: list[dict[str, Any]]) -> list[int]:
    model = BatchOfOne(BabyAIModelPolicy())
    return [int(model.call("act", {"obs": o})["action"]) for o in observations]


def openpi_clients(python: Path, port: int, requests: list[Any], clients: int,
                   tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "requests.msgpack").write_bytes(wire.pack(requests))
    out = tmp_path / "replies.json"
    done = subprocess.run([str(python), str(HERE / "openpi_clients.py"), str(port),
                           str(tmp_path / "requests.msgpack"), str(clients), str(out)],
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_openpi_client_gets_the_in_process_models_actions(
        openpi_python: Path, observations: list[dict[str, Any]], tmp_path: Path) -> None:
    """8 real openpi clients at once against the shipped model: each reply is the
    in-process model's action for that client's own observation, and they were batched."""
    expected = model_actions(observations)
    with serve_policy("model:policy", "--param", "forward_latency_ms=5") as (port, _):
        got = openpi_clients(openpi_python, port, [{"obs": o} for o in observations], 8,
                             tmp_path)
        served = stats(port)
    replies = {index: reply for client in got["results"] for index, reply in client}
    assert sorted(replies) == list(range(len(observations)))
    assert [replies[i]["action"] for i in range(len(observations))] == expected
    assert got["metadata"][0]["source"] == "model:policy"
    assert served["requests_served"] == len(observations)
    assert served["mean_batch_size"] > 1, served


def test_8_openpi_clients_are_batched_and_each_gets_exactly_its_own_replies(
        openpi_python: Path, tmp_path: Path) -> None:
    requests = [{"obs": {"tag": np.int64(i)}} for i in range(160)]
    with serve_policy("echo_nodesets:TaggedEcho", "--max-wait-ms", "20") as (port, _):
        got = openpi_clients(openpi_python, port, requests, 8, tmp_path)
        served = stats(port)
    for i, client in enumerate(got["results"]):
        assert [index for index, _ in client] == list(range(i, 160, 8))
        assert all(reply["action"] == index * 10 + 1 for index, reply in client)
    batches = [reply["batch"] for client in got["results"] for _, reply in client]
    assert served["requests_served"] == 160 and served["mean_batch_size"] > 1, served
    assert max(batches) > 1 and sum(served["batch_size_histogram"].values()) < 160


def test_our_client_nodeset_against_serve_policy(
        observations: list[dict[str, Any]], in_process: list[dict[str, Any]],
        tmp_path: Path) -> None:
    expected = model_actions(observations[:20])
    with serve_policy("model:policy") as (port, _):
        client = WebsocketPolicy(url=f"ws://127.0.0.1:{port}")
        try:
            assert [int(client.act(o)["action"]) for o in observations[:20]] == expected
        finally:
            client.close()
        run_dir = run(spec("model_remote", 4, url=f"ws://127.0.0.1:{port}"), tmp_path)
        served = stats(port)
    assert same([json.loads(p.read_text()) for p in
                 sorted(run_dir.glob("episodes/ep*/episode.json"))]) == in_process
    assert len(in_process) == EPISODES
    assert served["requests_served"] >= 20 + sum(r["step_count"] for r in in_process)


def one_line_exit_2(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "evaltui.cli", "serve-policy", *args,
                           "--no-queue"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(HERE), os.environ.get("PYTHONPATH", "")]), **(env or {})})
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evaltui serve-policy: "), done.stderr
    return lines[0]


def test_bad_sources_and_addresses_are_one_line_exit_2() -> None:
    assert "no nodeset 'brain'" in one_line_exit_2("model:brain")
    assert "cannot import module 'nosuch'" in one_line_exit_2("nosuch:Thing")
    assert "say which with --op" in one_line_exit_2("echo_nodesets:TwoOps")
    assert "no node op 'jump'" in one_line_exit_2("echo_nodesets:TwoOps", "--op", "jump")
    assert "needs an API key" in one_line_exit_2("model:policy", "--host", "0.0.0.0")
    assert "POLICY_KEY is not set" in one_line_exit_2("model:policy", "--api-key-env",
                                                      "POLICY_KEY", env={"POLICY_KEY": ""})
    assert "forward_latency_ms" in one_line_exit_2("model:policy", "--param",
                                                   "forward_latency_ms=-1")


def test_faults_answer_one_line_and_the_connection_goes_on() -> None:
    with serve_policy("echo_nodesets:TaggedEcho", "--param", "forward_ms=0") as (port, _):
        with connect(f"ws://127.0.0.1:{port}") as ws:
            assert wire.unpack(ws.recv())["op"] == "act"
            for frame, answer in [
                (wire.pack({"observation": 1}), "request has no input 'obs'"),
                (wire.pack({"obs": {"tag": np.int64(-1)}}), "ValueError: tag must be >= 0"),
                (b"\xc1not msgpack", "not a msgpack frame"),
                ("text", "binary msgpack frames"),
            ]:
                ws.send(frame)
                reply = ws.recv(timeout=10)
                assert isinstance(reply, str) and answer in reply and "\n" not in reply
                assert "Traceback" not in reply
            ws.send(wire.pack(wire.control(wire.EPISODE_START, __episode_id__="e1")))
            assert wire.unpack(ws.recv(timeout=10)) == {"__ack__": "episode_start"}
            ws.send(wire.pack({"obs": {"tag": np.int64(4)}}))
            assert wire.unpack(ws.recv(timeout=10))["action"] == 41


def test_an_api_key_is_required_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_KEY", "s3cret")
    with serve_policy("echo_nodesets:TaggedEcho", "--api-key-env", "SERVE_KEY") as (port, _):
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").text == "OK\n"
        assert httpx.get(f"http://127.0.0.1:{port}/stats").status_code == 401
        with pytest.raises(InvalidStatus) as refused:
            connect(f"ws://127.0.0.1:{port}").__enter__()
        assert refused.value.response.status_code == 401
        client = WebsocketPolicy(url=f"ws://127.0.0.1:{port}", api_key_env="SERVE_KEY")
        try:
            assert client.act({"tag": np.int64(2)})["action"] == 21
        finally:
            client.close()
        monkeypatch.setenv("WRONG_KEY", "guess")
        with pytest.raises(ValueError, match=r"refused the connection \(HTTP 401\)"):
            WebsocketPolicy.check_params({"url": f"ws://127.0.0.1:{port}",
                                          "api_key_env": "WRONG_KEY"})


def test_sigterm_stops_it_cleanly_saying_what_it_served(tmp_path: Path) -> None:
    kept = tmp_path / "stats.json"
    with serve_policy("echo_nodesets:TaggedEcho", "--stats-file", str(kept)) as (port, proc):
        client = WebsocketPolicy(url=f"ws://127.0.0.1:{port}")
        try:
            for tag in range(3):
                assert client.act({"tag": np.int64(tag)})["action"] == tag * 10 + 1
        finally:
            client.close()
        proc.terminate()
        assert proc.wait(timeout=20) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""
        assert proc.stdout is not None
        assert proc.stdout.read().strip() == ("stopped: served 3 requests in 3 batches (mean "
                                              "batch 1, histogram {1: 3})")
        stats = json.loads(kept.read_text())
        assert stats["requests_served"] == 3 and stats["batch_size_histogram"] == {"1": 3}
