"""Every route of DESIGN §7 (and the admit additions): happy path, its errors, and 401."""

from __future__ import annotations

import os
import shutil
import stat

import psutil
import pytest
from apihelpers import Backend, bot_spec, wait_until

from evaltui.api.models import API_PREFIX
from evaltui.contract.pidref import PidRef
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json, write_json_atomic
from evaltui.rundir.layout import episode_dir


def _done_run(backend: Backend, episodes: int = 2) -> str:
    run_id = backend.http().post("/runs", json=bot_spec(episodes)).json()["run_id"]
    assert backend.scheduler.wait(run_id, timeout=30) is RunState.DONE
    return run_id


def test_every_route_but_healthz_wants_the_token(backend: Backend) -> None:
    paths = backend.server.app.openapi()["paths"]
    routes = [(m.upper(), p) for p, ops in paths.items() for m in ops]
    routes += [("GET", "/openapi.json"), ("GET", f"{API_PREFIX}/healthz")]
    assert len(routes) >= 24
    for token in (None, "wrong-token-of-enough-length", backend.token + "x"):
        http = backend.http(token)
        for method, path in routes:
            url = backend.url + path.replace("{run_id}", "20250101_000000") \
                .replace("{index}", "0").replace("{name}", "x").replace("{admit_id}", "ab")
            answer = http.request(method, url, json={})
            if path in ("/healthz", f"{API_PREFIX}/healthz"):
                assert answer.status_code == 200
            else:
                assert answer.status_code == 401, (method, path, answer.text)
                assert answer.json()["detail"].startswith("missing or wrong bearer token")
                assert answer.headers["www-authenticate"] == "Bearer"
    scheme = backend.http(None).get(backend.url + API_PREFIX + "/runs",
                                    headers={"Authorization": f"Basic {backend.token}"})
    assert scheme.status_code == 401


def test_token_file_is_created_owner_only(backend: Backend, api_env: dict) -> None:
    path = api_env["state"] / "token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == backend.token and len(backend.token) >= 32


def test_health_info_and_openapi(backend: Backend) -> None:
    http = backend.http(None)
    assert http.get(backend.url + "/healthz").json()["service"] == "evaltui"
    assert http.get(backend.url + "/openapi.json").status_code == 401
    schema = backend.http().get(backend.url + "/openapi.json").json()
    assert f"{API_PREFIX}/runs/{{run_id}}/episodes/{{index}}/log" in schema["paths"]
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    info = backend.http().get("/info").json()
    assert info["pid"] == os.getpid() and info["fake_gpus"] and info["admits"]


def test_submit_list_show_and_spec(backend: Backend) -> None:
    http = backend.http()
    answer = http.post("/runs", json=bot_spec(2))
    assert answer.status_code == 201 and answer.json()["state"] == "queued"
    run_id = answer.json()["run_id"]
    assert backend.scheduler.wait(run_id, timeout=30) is RunState.DONE
    runs = http.get("/runs")
    assert runs.headers["x-total-count"] == "1"
    [run] = runs.json()
    assert run["run_id"] == run_id and run["state"] == "done"
    assert run["spec"]["graph_name"] == "babyai-bot" and run["spec"]["episodes_total"] == 2
    shown = http.get(f"/runs/{run_id}").json()
    assert shown["summary"]["episodes_finished"] == 2 and "episodes" not in shown["summary"]
    assert shown["scheduler"]["exit_code"] == 0
    assert http.get("/runs", params={"state": "done"}).json()[0]["run_id"] == run_id
    assert http.get("/runs", params={"state": "queued"}).json() == []
    assert http.get("/runs", params={"state": "bogus"}).status_code == 422
    assert http.get(f"/runs/{run_id}/spec").json()["eval"]["episode_count"] == 2


@pytest.mark.parametrize(("spec", "field"), [
    ({"graph": {}}, "graph.name"),
    ({"eval": {}}, "graph"),
    ({"graph": {"name": "x"}, "eval": {"episode_count": 0}}, "eval.episode_count"),
    ({"graph": {"name": "x"}, "bogus": 1}, "bogus"),
    ({"graph": {"name": "x"}, "active_workspace_dir": "relative/dir"}, "active_workspace_dir"),
])
def test_bad_specs_are_422_naming_the_field(backend: Backend, spec: dict, field: str) -> None:
    answer = backend.http().post("/runs", json=spec)
    assert answer.status_code == 422
    assert answer.json()["field"] == field
    assert field in answer.json()["detail"]


def test_bad_graph_impl_is_422_and_writes_nothing(backend: Backend, api_env: dict) -> None:
    spec = bot_spec(1)
    spec["graph"]["nodesets"]["policy"]["impl"] = "no.such.module:Policy"
    answer = backend.http().post("/runs", json=spec)
    assert answer.status_code == 422
    assert answer.json()["field"] == "graph.nodesets.policy.impl"
    assert not list((api_env["outputs"] / "eval_runs").glob("*")) if \
        (api_env["outputs"] / "eval_runs").exists() else True


def test_malformed_json_is_422(backend: Backend) -> None:
    answer = backend.http().post("/runs", content=b"{not json",
                                 headers={"content-type": "application/json"})
    assert answer.status_code == 422


def test_unknown_run_is_404_everywhere(backend: Backend) -> None:
    http = backend.http()
    for method, path in [("GET", "/runs/20250101_000000"), ("GET", "/runs/20250101_000000/spec"),
                         ("POST", "/runs/20250101_000000/cancel"),
                         ("POST", "/runs/20250101_000000/resume"),
                         ("GET", "/runs/20250101_000000/episodes"),
                         ("GET", "/runs/20250101_000000/episodes/0"),
                         ("GET", "/runs/20250101_000000/episodes/0/log"),
                         ("GET", "/runs/not-a-run-id"),
                         ("POST", "/runs/20250101_000000/priority")]:
        answer = http.request(method, path, json={"priority": 0})
        assert answer.status_code == 404, (method, path)
        assert "no run" in answer.json()["detail"]


def test_cancel_queued_running_and_finished(backend: Backend) -> None:
    http = backend.http()
    held = http.post("/lock", json={"owner": "tester", "ttl_sec": 60}).json()
    assert held["owner"] == "tester" and "tester" in held["reason"]
    queued = http.post("/runs", json=bot_spec(1)).json()["run_id"]
    wait_until(lambda: http.get("/queue").json()[0]["waiting_kind"] == "lock",
               what="the lock to hold the queue")
    assert http.post(f"/runs/{queued}/cancel").json() == {"run_id": queued,
                                                          "state": "cancelled"}
    assert http.post(f"/runs/{queued}/cancel").status_code == 409
    assert http.delete("/lock", params={"owner": "tester"}).json() == {"released": True}
    slow = http.post("/runs", json=bot_spec(200, latency_ms=20)).json()["run_id"]
    wait_until(lambda: http.get(f"/runs/{slow}").json()["state"] == "running", what="running")
    assert http.post(f"/runs/{slow}/cancel").json()["state"] in ("running", "cancelled")
    assert backend.scheduler.wait(slow, timeout=20) is RunState.CANCELLED


def test_resume_reruns_what_is_not_ok(backend: Backend) -> None:
    http = backend.http()
    run_id = _done_run(backend, 2)
    assert http.post(f"/runs/{run_id}/resume").status_code == 409  # everything is ok
    path = episode_dir(backend.scheduler.runs_root / run_id, 1) / "episode.json"
    write_json_atomic(path, {**read_json(path), "status": "error", "error": "flaky"})
    answer = http.post(f"/runs/{run_id}/resume")
    assert answer.status_code == 200 and answer.json()["state"] == "queued"
    assert http.post(f"/runs/{run_id}/resume").status_code == 409  # already queued again
    assert backend.scheduler.wait(run_id, timeout=30) is RunState.DONE
    assert http.get(f"/runs/{run_id}/episodes/1").json()["attempts"] == 2


def test_episodes_episode_and_log_pages(backend: Backend) -> None:
    http = backend.http()
    run_id = _done_run(backend, 3)
    rows = http.get(f"/runs/{run_id}/episodes")
    assert [r["episode_index"] for r in rows.json()] == [0, 1, 2]
    assert rows.headers["x-total-count"] == "3"
    assert http.get(f"/runs/{run_id}/episodes", params={"status": "error"}).json() == []
    assert len(http.get(f"/runs/{run_id}/episodes", params={"limit": 1, "offset": 2}).json()) == 1
    row = http.get(f"/runs/{run_id}/episodes/1").json()
    assert row["episode_index"] == 1 and row["status"] == "ok"
    assert http.get(f"/runs/{run_id}/episodes/9").status_code == 404
    assert http.get(f"/runs/{run_id}/episodes/-1").status_code == 422
    # Page through the log two records at a time: the pages tile it exactly.
    whole = http.get(f"/runs/{run_id}/episodes/0/log", params={"limit": 10_000}).json()
    assert whole["complete"] and whole["records"][0]["record"]["event"] == "episode_start"
    offset, seen = 0, []
    while True:
        page = http.get(f"/runs/{run_id}/episodes/0/log",
                        params={"offset": offset, "limit": 2}).json()
        seen += page["records"]
        offset = page["next_offset"]
        if page["complete"]:
            break
        assert len(page["records"]) == 2
    assert seen == whole["records"]
    bad = http.get(f"/runs/{run_id}/episodes/0/log", params={"offset": 1})
    assert bad.status_code == 422 and bad.json()["field"] == "offset"
    assert http.get(f"/runs/{run_id}/episodes/0/log", params={"limit": 0}).status_code == 422


def test_queue_and_resources(backend: Backend) -> None:
    http = backend.http()
    http.post("/lock", json={"owner": "tester"})
    run_id = http.post("/runs", json=bot_spec(1, vram_mb=1000)).json()["run_id"]
    queue = wait_until(lambda: [q for q in http.get("/queue").json()
                                if q["waiting_kind"] == "lock"], what="a lock reason")
    assert queue[0]["run_id"] == run_id and "held by tester" in queue[0]["waiting_reason"]
    assert queue[0]["estimate_mb"] == 1000
    res = http.get("/resources").json()
    assert res["fake_gpus"] and res["gpus"][0]["total_mb"] == 24576
    assert res["lock"]["owner"] == "tester" and res["host"]["ram_total_mb"] > 0
    moved = http.post(f"/runs/{run_id}/priority", json={"priority": 50})
    assert moved.json() == {"run_id": run_id, "state": "queued"}
    assert http.get("/queue").json()[0]["priority"] == 50
    assert http.post(f"/runs/{run_id}/priority", json={"priority": 101}).status_code == 422
    assert http.post("/runs/20250101_000000/priority", json={"priority": 1}).status_code == 404
    assert http.post("/lock", json={"owner": "other"}).status_code == 409
    assert http.post("/lock", json={"owner": ""}).status_code == 422
    assert http.delete("/lock", params={"owner": "other"}).json() == {"released": False}
    assert http.delete("/lock").json() == {"released": True}
    assert backend.scheduler.wait(run_id, timeout=30) is RunState.DONE
    assert http.post(f"/runs/{run_id}/priority", json={"priority": 1}).status_code == 409


def test_nodesets_load_list_unload(backend: Backend) -> None:
    http = backend.http()
    assert http.get("/nodesets").json() == []
    bad = http.post("/nodesets/model/load", json={"impl": "no.such:Thing"})
    assert bad.status_code == 422 and bad.json()["field"] == "impl"
    assert http.post("/nodesets/model/load", json={"impl": "os:path", "x": 1}).status_code == 422
    assert http.post("/nodesets/model/unload").status_code == 404
    assert http.post("/nodesets/bad name!/load", json={"impl": "a:b"}).status_code == 422
    loaded = http.post("/nodesets/model/load",
                       json={"impl": "evaltui.benchmarks.babyai.model:BabyAIModelPolicy"})
    assert loaded.status_code == 200, loaded.text
    info = loaded.json()
    assert info["origin"] == "interactive" and psutil.pid_exists(info["pid"])
    assert [n["name"] for n in http.get("/nodesets").json()] == [info["name"]]
    assert http.post(f"/nodesets/{info['name']}/unload").json()["name"] == info["name"]
    assert http.get("/nodesets").json() == []


def test_body_over_the_limit_is_413(make_backend) -> None:
    backend = make_backend(max_body_bytes=10_000)
    http = backend.http()
    big = {"graph": {"name": "x" * 20_000}}
    assert http.post("/runs", json=big).status_code == 413

    def chunks():  # no Content-Length: the streamed size is what counts
        for _ in range(20):
            yield b" " * 1000

    answer = http.post("/runs", content=chunks(), headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert "over the limit" in answer.json()["detail"]
    assert http.post("/runs", json={"graph": {}}).status_code == 422  # small: goes through


def test_admit_routes(backend: Backend) -> None:
    http = backend.http()
    me = psutil.Process()
    body = {"profile": "p", "exclusive_gpu": True, "holder_pid": me.pid,
            "holder_create_time": me.create_time(), "command": "train.py"}
    created = http.post("/admits", json=body)
    assert created.status_code == 201
    admit_id = created.json()["admit_id"]
    entry = http.get(f"/admits/{admit_id}", params={"wait": 5, "seen": 1}).json()
    entry = wait_until(lambda: http.get(f"/admits/{admit_id}").json()["state"] == "admitted"
                       and http.get(f"/admits/{admit_id}").json(), what="admission")
    assert entry["gpu"] == 0 and entry["reserved_mb"] == 24576
    assert entry["env"] == {"CUDA_VISIBLE_DEVICES": "0", "EVALTUI_FAKE_GPU_INDEX": "0"}
    ledger = http.get("/resources").json()["ledger"]
    assert [r["run_id"] for r in ledger] == [f"admit:{admit_id}"]
    assert http.get("/admits").json()[0]["admit_id"] == admit_id
    assert http.post(f"/admits/{admit_id}/bind", json={"pid": 1, "create_time": 0}) \
        .status_code == 422  # not that process
    assert http.post("/admits", json={**body, "holder_pid": 999_999_999}).status_code == 422
    released = http.delete(f"/admits/{admit_id}").json()
    assert released["state"] == "released"
    assert http.delete(f"/admits/{admit_id}").json()["state"] == "released"
    assert http.get("/resources").json()["ledger"] == []
    for method, path in [("GET", "/admits/nope"), ("DELETE", "/admits/nope"),
                         ("POST", "/admits/nope/bind")]:
        kwargs = {"json": {"pid": 1, "create_time": 0}} if method == "POST" else {}
        assert http.request(method, path, **kwargs).status_code == 404
    assert http.post("/admits/nope/serving", json={"url": "ws://127.0.0.1:1",
                                                   "requests_served": 0}).status_code == 404
    assert http.post(f"/admits/{admit_id}/serving", json={"url": "ws://x",
                                                         "requests_served": -1}
                     ).status_code == 422


def test_run_list_follows_processes_and_files(backend: Backend, popen) -> None:
    """GET /runs is served from an index, yet a run started elsewhere that dies (no file
    changes) reads aborted at once, and a new or removed run dir shows at once."""
    http = backend.http()
    root = backend.scheduler.runs_root
    assert http.get("/runs").json() == []
    holder = popen(["sleep", "60"])
    ref = PidRef.of(holder.pid)
    run = root / "20250101_000003"
    run.mkdir(parents=True)
    write_json_atomic(run / "scheduler.json", {"state": "running", "pid": ref.pid,
                                               "pid_create_time": ref.create_time})
    write_json_atomic(run / "summary.json", {"status": "running", "episodes_finished": 1})
    assert [(r["run_id"], r["state"]) for r in http.get("/runs").json()] == \
        [("20250101_000003", "running")]
    assert http.get("/runs").json()[0]["summary"]["episodes_finished"] == 1
    write_json_atomic(run / "summary.json", {"status": "running", "episodes_finished": 2})
    assert http.get("/runs").json()[0]["summary"]["episodes_finished"] == 2
    holder.kill()
    holder.wait()
    assert http.get("/runs").json()[0]["state"] == "aborted"
    assert http.get("/runs", params={"state": "running"}).json() == []
    (root / "20250101_000004").mkdir()
    assert [r["run_id"] for r in http.get("/runs").json()] == ["20250101_000004",
                                                               "20250101_000003"]
    shutil.rmtree(run)
    assert [r["run_id"] for r in http.get("/runs").json()] == ["20250101_000004"]


def test_a_badly_typed_param_is_422_and_writes_nothing(backend: Backend, api_env: dict) -> None:
    """--set policy.noise=abc is refused at submit (422), not queued to die in a worker."""
    spec = bot_spec(1)
    spec["eval"]["selectors"] = {"policy.noise": "abc"}
    answer = backend.http().post("/runs", json=spec)
    assert answer.status_code == 422
    assert answer.json()["field"] == "graph.nodesets.policy.params.noise"
    assert backend.http().get("/runs").json() == []


def test_submit_answers_with_the_spec_warnings(backend: Backend) -> None:
    """A step budget below the env's own limit is allowed, and said at submit."""
    spec = bot_spec(1)
    spec["eval"]["step_budget"] = 10  # GoToLocal's own limit is 64
    answer = backend.http().post("/runs", json=spec)
    assert answer.status_code == 201
    [warning] = answer.json()["warnings"]
    assert "eval.step_budget 10 is below the env's own step limit (64)" in warning
    clean = backend.http().post("/runs", json=bot_spec(1)).json()
    assert clean["warnings"] == []
