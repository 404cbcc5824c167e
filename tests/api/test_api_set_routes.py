"""The set routes over a real served backend: create (with the CLI's checks), list, show
with the table, cancel, resume, ``set`` events; set ids that are no set dir are 404."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from apihelpers import Backend, wait_until

from evaltui.api.client import ApiClient, Conflict, InvalidRequest, NotFound
from evaltui.api.sse import ServerEvent
from evaltui.rundir.jsonfiles import read_json


def _events(client: ApiClient, out: queue.Queue) -> None:
    def read() -> None:
        try:
            for event in client.events(last_event_id=0):  # replays from the first event
                out.put(event)
        except Exception as exc:  # the stream ends when the server stops
            out.put(exc)

    threading.Thread(target=read, daemon=True).start()


def _set_events_until(out: queue.Queue, cond: Any, timeout: float = 60.0) -> list[ServerEvent]:
    seen: list[ServerEvent] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            item = out.get(timeout=0.2)
        except queue.Empty:
            continue
        assert isinstance(item, ServerEvent), item
        if item.event == "set":
            seen.append(item)
            if cond(seen):
                return seen
    raise AssertionError(f"set events so far: {[e.data for e in seen]}")


def _settled(client: ApiClient, set_id: str, timeout: float = 60.0) -> dict[str, Any]:
    return wait_until(lambda: (b := client.get_set(set_id)) and not b["running"] and b,
                      timeout, f"set {set_id} settled")


def test_create_runs_the_set_streams_member_events_and_shows_the_table(
        backend: Backend, api_env: dict[str, Path], tmp_path: Path) -> None:
    client = backend.client()
    out: queue.Queue = queue.Queue()
    _events(client, out)
    text = yaml.safe_dump({"name": "grid", "base": {"graph": "bot", "episodes": 3},
                           "matrix": {"policy.noise": [0.0, 0.5]},
                           "baseline": {"policy.noise": 0.0}})
    made = client.create_set(text, base_dir=tmp_path)  # YAML text, as the set file is
    assert made["set_id"] == "grid" and len(made["members"]) == 2
    # Answered before the driver submits them (202): new members are pending.
    assert all(m["run_id"] is None and m["state"] == "pending" for m in made["members"]), \
        made["members"]
    assert Path(made["set_dir"]) == api_env["outputs"] / "eval_sets" / "grid"

    def both_done(events: list[ServerEvent]) -> bool:
        return sum(e.data["state"] == "done" for e in events) == 2

    events = _set_events_until(out, both_done)
    for member in made["members"]:
        states = [e.data["state"] for e in events if e.data["key"] == member["key"]]
        assert states[0] == "pending" and states[-1] == "done" and "queued" in states
        assert all(e.data["set_id"] == "grid" for e in events)

    body = _settled(client, "grid")
    assert [m["state"] for m in body["members"]] == ["done", "done"]
    for member in body["members"]:  # the table's numbers are the members' own summaries
        run = backend.scheduler.get_run(member["run_id"])
        summary = read_json(run.run_dir / "summary.json")
        assert member["metrics"] == summary["metrics"]
        assert member["metrics_n"] == summary["metrics_n"]
        assert member["attempts"] == 1
    assert body["axes"] == ["policy.noise"] and "success" in body["metrics"]
    with_base = client.get_set("grid", baseline=True)
    assert with_base["baseline"]["axes"] == {"policy.noise": 0.0}
    assert "vs_baseline" in with_base["members"][1]

    listed = client.list_sets()
    assert [(s["set_id"], s["members"], s["running"]) for s in listed] == [("grid", 2, False)]
    assert listed[0]["states"] == {"done": 2}

    runs_before = {r.run_id for r in client.list_runs()}
    again = client.create_set(yaml.safe_load(text), base_dir=tmp_path)  # JSON body
    assert [m["run_id"] for m in again["members"]] == [m["run_id"] for m in body["members"]]
    assert [m["state"] for m in again["members"]] == ["done", "done"]
    assert {r.run_id for r in client.list_runs()} == runs_before  # no run started


def test_create_answers_before_submitting_the_members(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A set of many members takes long to submit; the client must not time out on it:
    POST /sets answers (202) while not one member is submitted yet."""
    gate = threading.Event()
    submit = backend.scheduler.submit

    def held_submit(spec: Any) -> Any:
        gate.wait(60)  # a slow queue: the answer must not wait for it
        return submit(spec)

    monkeypatch.setattr(backend.scheduler, "submit", held_submit)
    client = backend.client()
    data = {"name": "many", "base": {"graph": "bot", "episodes": 1},
            "matrix": {"policy.noise": [i / 100 for i in range(12)]}}
    try:
        made = client.create_set(data, base_dir=tmp_path)
        assert len(made["members"]) == 12
        assert all(m["state"] == "pending" and m["run_id"] is None for m in made["members"])
        assert backend.scheduler.list_runs() == []  # nothing submitted when it answered
    finally:
        gate.set()
    body = _settled(client, "many", timeout=120)
    assert [m["state"] for m in body["members"]] == ["done"] * 12


@pytest.mark.parametrize(("data", "field"), [
    ({"name": "bad", "base": {"graph": "bot"}, "matrix": {"colour": [1]}}, "matrix.colour"),
    ({"name": "bad", "base": {"graph": "bot"}, "matrix": {"policy.noise": []}},
     "matrix.policy.noise"),
    ({"name": "bad", "base": {"graph": "bot"}, "matrix": {"policy.bogus": [1]}},
     "matrix.policy.bogus"),
    ({"name": "bad", "base": {"graph": "bot"}, "matrix": {"policy.noise": [0.0]},
      "baseline": {"policy.noise": 0.7}}, "baseline"),
    ("name: [unclosed", "<set file>"),
    ({"name": "okname\n", "base": {"graph": "bot"}, "matrix": {"policy.noise": [0.0]}},
     "name"),
    ({"name": "abs", "base": {"graph": "model"}, "matrix": {"checkpoint": {
        "glob": "/etc/*.conf"}}}, "matrix.checkpoint.glob"),
    ({"name": "up", "base": {"graph": "model"}, "matrix": {"checkpoint": {
        "glob": "../outside/*.npz"}}}, "matrix.checkpoint.glob"),
    ({"name": "bad", "base": {"graph": "bot", "executor": "slurm"},  # `set run` submits it
      "matrix": {"policy.noise": [0.0]}}, "base.executor"),
])
def test_a_bad_set_file_is_a_422_naming_the_field_and_writes_nothing(
        backend: Backend, api_env: dict[str, Path], data: Any, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        backend.client().create_set(data)
    assert caught.value.status == 422 and caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ") and "\n" not in str(caught.value)
    assert not (api_env["outputs"] / "eval_sets").exists()
    assert backend.scheduler.list_runs() == []


def test_set_ids_that_are_no_set_dir_are_404_never_a_path_outside(
        backend: Backend, api_env: dict[str, Path], tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "set.json").write_text(json.dumps({"set_id": "x", "name": "x", "file": {},
                                                  "base_dir": "/", "members": []}))
    sets = api_env["outputs"] / "eval_sets"
    sets.mkdir()
    (sets / "linked").symlink_to(outside)
    http = backend.http()
    for ref in ("..", "%2E%2E", "..%2Fstate", "nope", "linked", "a%2Fb", ".hidden"):
        for method, suffix in (("GET", ""), ("POST", "/cancel"), ("POST", "/resume")):
            response = http.request(method, f"/sets/{ref}{suffix}")
            assert response.status_code == 404, (method, ref, response.text)
    assert [s["set_id"] for s in backend.client().list_sets()] == []


def test_cancel_stops_the_set_and_resume_completes_it(backend: Backend, tmp_path: Path
                                                      ) -> None:
    client = backend.client()
    data = {"name": "slow", "base": {"graph": "bot", "episodes": 4,
                                     "set": {"env.sim_latency_ms": 150}},
            "matrix": {"policy.noise": [0.0, 0.3]}}
    made = client.create_set(data)
    with pytest.raises(Conflict):  # the backend drives it already
        client.create_set(data)
    assert len(made["members"]) == 2  # answered at once; the driver submits them
    run_ids = wait_until(lambda: (ids := [m["run_id"] for m in client.get_set("slow")["members"]])
                         and all(ids) and ids, 30, "both members submitted")
    wait_until(lambda: any(backend.scheduler.get_run(r).state.value == "running"
                           for r in run_ids), 30, "a member running")
    assert client.cancel_set("slow")["cancelled"] == 2
    body = _settled(client, "slow")
    assert [m["state"] for m in body["members"]] == ["cancelled", "cancelled"]
    on_disk = read_json(Path(body["set_dir"]) / "set.json")
    assert [m["state"] for m in on_disk["members"]] == ["cancelled", "cancelled"]

    resumed = client.resume_set("slow")
    assert [m["run_id"] for m in resumed["members"]] == run_ids  # same runs, resumed
    body = _settled(client, "slow")
    assert [m["state"] for m in body["members"]] == ["done", "done"]
    assert all(m["metrics_n"]["success"] == 4 for m in body["members"])
    with pytest.raises(NotFound):
        client.cancel_set("nope")


def test_the_set_commands_are_clients_of_the_backend_at_backend_url(
        backend: Backend, api_env: dict[str, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from evaltui.cli import main

    monkeypatch.setenv("BACKEND_URL", backend.url)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "bad", "base": {"graph": "bot"},
                                   "matrix": {"policy.bogus": [1, 2]}}))
    assert main(["set", "run", str(bad)]) == 2  # the backend's check, the CLI's line
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: matrix.policy.bogus: ") and "\n" not in err
    assert not (api_env["outputs"] / "eval_sets").exists()

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "away", "base": {"graph": "bot", "episodes": 2},
                                    "matrix": {"policy.noise": [0.0, 0.5]}}))
    assert main(["set", "run", str(path), "--detach"]) == 0
    assert backend.url in capsys.readouterr().err
    # Nothing here drives it any more: the backend does, to the end.
    body = _settled(backend.client(), "away")
    assert [m["state"] for m in body["members"]] == ["done", "done"], body
    assert main(["set", "cancel", "away"]) == 0
    assert "cancel asked of 0 member run(s)" in capsys.readouterr().out
    assert main(["set", "resume", str(api_env["outputs"] / "eval_sets" / "away"),
                 "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert [m["state"] for m in table["members"]] == ["done", "done"]
    assert [m["run_id"] for m in table["members"]] == [m["run_id"] for m in body["members"]]
