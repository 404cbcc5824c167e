"""``WebsocketPolicy`` (evaltui.nodesets.openpi) against a reference openpi server written
in the test from the published protocol (refserver.py): real run subprocesses over real
BabyAI episodes, rows compared with the in-process model's."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from policyhelpers import EPISODES, reference_server, run, same, spec
from ports import free_port
from runhelpers import (
    episode_rows,
    finished_count,
    running,
    wait_until,
)

from evaltui.cli import main
from evaltui.nodesets.serverrecord import read_latency, read_metadata
from evaltui.rundir.jsonfiles import read_json


@pytest.mark.parametrize("workers", [1, 4])
def test_rows_through_the_reference_server_equal_the_in_process_model(
        tmp_path: Path, in_process: list[dict[str, Any]], workers: int) -> None:
    with reference_server() as (port, _):
        run_dir = run(spec("model_remote", workers, url=f"ws://127.0.0.1:{port}"), tmp_path)
    assert same(episode_rows(run_dir)) == in_process
    meta = read_metadata(run_dir)
    assert meta is not None and meta["metadata"] == {"policy": "babyai-reference",
                                                     "action_dim": 1}
    latency = read_latency(run_dir)
    steps = sum(r["step_count"] for r in episode_rows(run_dir))
    assert latency is not None and latency["steps"] == steps
    assert 0 < latency["p50_ms"] <= latency["p99_ms"]
    if workers == 1:  # the report's run page says it
        assert main(["report", str(run_dir), "-o", str(tmp_path / "site")]) == 0
        html = (tmp_path / "site" / "index.html").read_text()
        assert (f'<dt>policy server</dt><dd>p50 {latency["p50_ms"]:g} ms, p99 '
                f'{latency["p99_ms"]:g} ms over {steps} requests</dd>') in html


def test_obs_keys_action_key_and_chunks(tmp_path: Path, in_process: list[dict[str, Any]]
                                        ) -> None:
    """Nested server keys, the reply's ``actions`` chunk: with replan_every=1 the first of
    each chunk is executed (rows equal the model's); with 4, one request per 4 steps."""
    mapping = {"obs/image": "observation/image", "obs/direction": "observation/state",
               "obs/mission": "prompt"}
    with reference_server("chunk") as (port, _):
        url = f"ws://127.0.0.1:{port}"
        one = run(spec("model_remote", 2, url=url, obs_keys=mapping, action_key="actions",
                       replan_every=1, episode_control=True), tmp_path / "one")
        four = run(spec("model_remote", 1, episodes=2, url=url, obs_keys=mapping,
                        action_key="actions", replan_every=4), tmp_path / "four")
    assert same(episode_rows(one)) == in_process
    rows = episode_rows(four)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    asked = read_latency(four)
    assert asked is not None
    assert asked["steps"] == sum(-(-r["step_count"] // 4) for r in rows)


def test_an_error_frame_ends_the_episode_as_error_with_the_servers_line(tmp_path: Path
                                                                        ) -> None:
    with reference_server("error") as (port, _):
        run_dir = run(spec("model_remote", 1, episodes=2, url=f"ws://127.0.0.1:{port}"),
                      tmp_path)
    rows = episode_rows(run_dir)
    assert [r["status"] for r in rows] == ["error", "error"]
    assert all("policy server error: ValueError: camera frame is empty" in r["error"]
               for r in rows)


def test_a_reply_later_than_the_step_budget_is_a_timeout(tmp_path: Path) -> None:
    with reference_server("slow") as (port, _):
        run_dir = run(spec("model_remote", 1, episodes=1, step_timeout=1.0,
                           url=f"ws://127.0.0.1:{port}", timeout_s=1.0), tmp_path)
    [row] = episode_rows(run_dir)
    assert row["status"] == "timeout", row
    assert "sent no reply within timeout_s 1 s" in row["error"]


def test_a_malformed_reply_names_the_missing_key(tmp_path: Path) -> None:
    with reference_server("malformed") as (port, _):
        run_dir = run(spec("model_remote", 1, episodes=1, url=f"ws://127.0.0.1:{port}"),
                      tmp_path)
    [row] = episode_rows(run_dir)
    assert row["status"] == "error"
    last = row["error"].strip().splitlines()[-1]
    assert "action_key 'action': no key 'action'" in last and "'act'" in last, last


def evaltui_eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltui.cli", "eval", "model_remote",
                           "--episodes", "2", "--outputs", str(tmp_path / "o"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_a_server_absent_at_start_is_one_line_exit_2_and_nothing_runs(tmp_path: Path
                                                                      ) -> None:
    port = free_port()
    done = evaltui_eval(tmp_path, "--set", f"policy.url=\"ws://127.0.0.1:{port}\"")
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach the policy server at ws://127.0.0.1:{port}" \
        in lines[0], done.stderr
    assert not list((tmp_path / "o").glob("eval_runs/*"))


def test_a_wrong_api_key_is_one_line_and_no_retry_storm(tmp_path: Path) -> None:
    log = tmp_path / "handshakes.log"
    with reference_server(key="right-key", log=log) as (port, _):
        done = subprocess.run(
            [sys.executable, "-m", "evaltui.cli", "eval", "model_remote", "--episodes", "2",
             "--outputs", str(tmp_path / "o"), "--set", f"policy.url=\"ws://127.0.0.1:{port}\"",
             "--set", "policy.api_key_env=\"POLICY_KEY\""],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**__import__("os").environ, "POLICY_KEY": "wrong-key"})
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused the connection (HTTP 401)" in lines[0], done.stderr
    tries = [line for line in log.read_text().splitlines() if line != "None"]
    assert tries == ["Api-Key wrong-key"]  # one handshake, not a storm of retries
    assert not list((tmp_path / "o").glob("eval_runs/*"))


def test_a_server_killed_mid_run_errors_the_episodes_in_flight_which_are_retried(
        tmp_path: Path, in_process: list[dict[str, Any]]) -> None:
    port = free_port()
    data = spec("model_remote", 2, retries=2, url=f"ws://127.0.0.1:{port}")
    data["graph"]["nodesets"]["env"]["params"]["sim_latency_ms"] = 60
    with reference_server(port=port) as (_, server):
        with running(data, tmp_path) as (run_dir, proc):
            wait_until(lambda: finished_count(run_dir) >= 2, 60, "2 episodes")
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=30)
            with reference_server(port=port):
                assert proc.wait(timeout=180) == 0
    rows = episode_rows(run_dir)
    # Only an attempt that ended ``error`` is retried (executor/dealing.py): attempts > 1
    # is how the row tells that the episode in flight at the kill ended in error.
    retried = [r["episode_id"] for r in rows if r["attempts"] > 1]
    assert retried, "the kill fell between episodes: no episode was in flight"
    # None lost, none twice, every one ok on its retry with the model's own outcome.
    assert [r | {"attempts": 1} for r in same(rows)] == in_process
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done" and summary["counts_by_status"] == {"ok": EPISODES}
