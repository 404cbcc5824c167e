"""Path traversal in run_id and episode index never reads outside the outputs root."""

from __future__ import annotations

import json
import logging
import shutil
import socket
from pathlib import Path

import httpx
import pytest
from apihelpers import Backend, bot_spec

from evaltui.api.models import API_PREFIX
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.runs.episodes import EpisodeWatcher

SECRET = "top-secret-outside-the-outputs-root"

RUN_IDS = [
    "..", "../..", "../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "%2e%2e%2f%2e%2e", "%2e%2e",
    "..%252F..%252F", "20250101_000000/../../secret", "20250101_000000%2F..%2F..%2Fsecret",
    "20250101_000000%00", "20250101_000000_1", "20250101_000000_02", "/etc/passwd",
    "%2Fetc%2Fpasswd", "..\\..\\secret", "20250101_000000 ", "２０２５０１０１_００００００",
    "20250101_000000_" + "9" * 400, "a" * 5000, "%C0%AE%C0%AE%2F", "~", "$HOME", "*", "?",
]
SUFFIXES = ["", "/spec", "/episodes", "/episodes/0", "/episodes/0/log", "/cancel", "/resume"]


def _raw_get(url: str, target: str, token: str, method: str = "GET") -> tuple[int, bytes]:
    """Send a request line exactly as given (no client-side normalisation of '..')."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"{method} {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}"
                     "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture
def planted(backend: Backend, tmp_path: Path) -> Path:
    """A secret run-like dir next to the outputs root, and a real run to aim from."""
    secret = tmp_path / "secret"
    (secret / "episodes" / "ep0000").mkdir(parents=True)
    for name in ("episodes/ep0000/episode.json", "episodes/ep0000/log.jsonl", "spec.json",
                 "summary.json", "scheduler.json"):
        (secret / name).write_text(json.dumps({"episode_index": 0, "secret": SECRET}) + "\n")
    (tmp_path / "passwd").write_text(SECRET)
    run = runs_root(backend.scheduler.outputs) / "20250101_000001"
    (run / "episodes").mkdir(parents=True)
    write_json_atomic(run / "scheduler.json", {"state": "done", "exit_code": 0})
    return secret


def test_traversal_in_run_id_is_404_and_reads_nothing(backend: Backend, planted: Path) -> None:
    for run_id in RUN_IDS:
        for suffix in SUFFIXES:
            method = "POST" if suffix in ("/cancel", "/resume") else "GET"
            status, body = _raw_get(backend.url, f"{API_PREFIX}/runs/{run_id}{suffix}",
                                    backend.token, method)
            assert status in (400, 404, 422), (run_id, suffix, status, body[:200])
            assert SECRET.encode() not in body


def test_normalising_clients_cannot_escape_either(backend: Backend, planted: Path) -> None:
    http = backend.http()
    for run_id in RUN_IDS:
        answer = http.get(f"/runs/{run_id}/episodes/0")
        assert answer.status_code in (404, 422) and SECRET not in answer.text


def test_episode_index_is_an_integer_only(backend: Backend, planted: Path) -> None:
    for index in ["..", "..%2F..", "0/../..", "-1", "1e3", "0x1", "%30", " 0", "0.0",
                  "9" * 40, "٣"]:
        for tail in ("", "/log"):
            status, body = _raw_get(backend.url,
                                    f"{API_PREFIX}/runs/20250101_000001/episodes/{index}{tail}",
                                    backend.token)
            assert status in (400, 404, 422), (index, status)
            assert SECRET.encode() not in body


def test_relative_names_from_a_real_run_are_refused(backend: Backend, planted: Path) -> None:
    """From a real run dir, ``..`` segments would reach the secret: they never get there."""
    for target in ["20250101_000001/../../../secret", "20250101_000001%2F..%2F..%2F..%2Fsecret",
                   "20250101_000001/..%2F..%2F..%2Fsecret", "..%2F..%2Fsecret"]:
        for suffix in SUFFIXES:
            status, body = _raw_get(backend.url, f"{API_PREFIX}/runs/{target}{suffix}",
                                    backend.token)
            assert status in (400, 404, 405, 422), (target, suffix, status)
            assert SECRET.encode() not in body
    assert SECRET not in backend.http().get("/runs").text


# ---- symlinks planted inside the outputs root -------------------------------------

SYMLINK_SECRET = "symlinked-secret-outside-the-outputs-root"

# Where a symlink is planted in a copy of a real finished run, and what it refuses ("run":
# every route of the run; "epdir": the routes of episode 1; "row": its episode.json; "log":
# its log; None: no route reads it, but it must not leak either).
PLANTS: dict[str, str | None] = {
    "": "run",  # the run dir itself
    "spec.json": "run", "summary.json": "run", "scheduler.json": "run", "_DONE": "run",
    "shared_urls.json": "run", "graph.json": "run", "episodes": "run",
    "episodes/ep0001": "epdir", "episodes/ep0001/episode.json": "row",
    "episodes/ep0001/log.jsonl": "log",
    "episodes/ep0001/trajectory.json": None,
}
"""Plus, with scope None, every other file or dir of the ep dir (its frames)."""

# Every route that takes a run: (method, path) -> the plant scopes that make it 404. The test
# below fails if the API grows a run route this table does not name.
RUN_ROUTES: dict[tuple[str, str], frozenset[str]] = {
    ("get", "/runs/{run_id}"): frozenset({"run"}),
    ("get", "/runs/{run_id}/spec"): frozenset({"run"}),
    ("get", "/runs/{run_id}/episodes"): frozenset({"run"}),
    ("get", "/runs/{run_id}/episodes/{index}"): frozenset({"run", "epdir", "row"}),
    ("get", "/runs/{run_id}/episodes/{index}/log"): frozenset({"run", "epdir", "log"}),
    ("post", "/runs/{run_id}/cancel"): frozenset({"run"}),
    ("post", "/runs/{run_id}/resume"): frozenset({"run"}),
    ("post", "/runs/{run_id}/priority"): frozenset({"run"}),
}
LIST_ROUTES = {("get", "/runs"), ("get", "/queue"), ("get", "/events")}
"""Routes over every run: checked for leaks (``/events`` is a stream: see its own test)."""


def _secret_twin(run: Path, into: Path) -> None:
    """A copy of ``run`` with the secret in every file, in the same formats."""
    shutil.copytree(run, into)

    def tainted(data: object) -> object:
        if not isinstance(data, dict):
            return data
        return {**data, "secret": SYMLINK_SECRET, "error": SYMLINK_SECRET,
                "graph_name": SYMLINK_SECRET}

    for path in into.rglob("*"):
        if path.is_file() and path.suffix == ".json":
            path.write_text(json.dumps(tainted(json.loads(path.read_text()))))
        elif path.is_file() and path.suffix == ".jsonl":
            lines = [json.dumps(tainted(json.loads(line)))
                     for line in path.read_text().splitlines() if line.strip()]
            path.write_text("\n".join(lines) + "\n")
        elif path.is_file():
            path.write_bytes(SYMLINK_SECRET.encode() * 4)


@pytest.fixture
def planted_runs(backend: Backend, tmp_path: Path) -> dict[str, str]:
    """A real finished run, and one copy of it per plant: {plant: run_id}."""
    sched = backend.scheduler
    run_id, _ = sched.submit(bot_spec(2))
    assert sched.wait(run_id, 60) is RunState.DONE
    root = runs_root(sched.outputs)
    template = tmp_path / "template"
    shutil.copytree(root / run_id, template)
    # As if summary.json was last written before episode 1 ended: its row comes from
    # episode.json, so the episode list reads that file too.
    summary = json.loads((template / "summary.json").read_text())
    summary["episodes"] = [r for r in summary["episodes"] if r["episode_index"] != 1]
    (template / "summary.json").write_text(json.dumps(summary))
    secret = tmp_path / "secret-run"
    _secret_twin(template, secret)
    ep = template / "episodes" / "ep0001"
    frames = [str(p.relative_to(template)) for p in [*ep.iterdir(), *ep.glob("*/*")]
              if str(p.relative_to(template)) not in PLANTS]
    assert frames, "the bot's episodes log frames"
    runs = {}
    for n, plant in enumerate([*PLANTS, *frames]):
        rid = f"20250102_{n:06d}"
        target = root / rid
        shutil.copytree(template, target)
        link = target / plant if plant else target
        if link.is_dir():
            shutil.rmtree(link)
        else:
            link.unlink()
        link.symlink_to(secret / plant if plant else secret)
        runs[plant] = rid
    return runs


def _call(http: httpx.Client, method: str, path: str, run_id: str) -> httpx.Response:
    url = path.replace("{run_id}", run_id).replace("{index}", "1")
    if method == "post":
        return http.post(url, json={"priority": 1})
    return http.get(url)


def test_every_run_route_is_covered(backend: Backend) -> None:
    """A new route that takes a run must be added to RUN_ROUTES (and so to the test below)."""
    spec = httpx.get(f"{backend.url}/openapi.json", timeout=30,
                     headers={"Authorization": f"Bearer {backend.token}"}).json()
    routes = {(method, path.removeprefix(API_PREFIX))
              for path, item in spec["paths"].items() for method in item}
    run_routes = {r for r in routes if "{run_id}" in r[1]}
    assert run_routes == set(RUN_ROUTES), "run routes changed: update RUN_ROUTES"
    reading = {r for r in routes if r[1].startswith(("/runs", "/queue", "/events"))}
    assert reading <= set(RUN_ROUTES) | LIST_ROUTES | {("post", "/runs")}, reading


def test_a_symlink_out_of_the_root_is_404_for_every_route(
        backend: Backend, planted_runs: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """``ln -sf /etc/passwd episodes/ep0002/log.jsonl`` is not served by the log route;
    nor is such a spec.json, episode.json, a whole ep dir or the run dir."""
    http = backend.http()
    caplog.set_level(logging.WARNING, logger="evaltui.api.runfiles")
    for plant, run_id in planted_runs.items():
        scope = PLANTS.get(plant)
        for (method, path), refusing in RUN_ROUTES.items():
            answer = _call(http, method, path, run_id)
            assert SYMLINK_SECRET not in answer.text, (plant, path)
            assert answer.status_code < 500, (plant, path, answer.text)
            if scope in refusing:
                assert answer.status_code == 404, (plant, method, path, answer.text)
            elif method == "get":
                assert answer.status_code == 200, (plant, method, path, answer.text)
        warned = any(run_id in r.getMessage() for r in caplog.records)
        assert warned == (scope is not None), plant  # each refusal is logged
    listed = http.get("/runs")
    assert listed.status_code == 200 and SYMLINK_SECRET not in listed.text
    shown = {r["run_id"] for r in listed.json()}
    for plant, run_id in planted_runs.items():
        assert (run_id in shown) == (PLANTS.get(plant) != "run"), plant
    assert SYMLINK_SECRET not in http.get("/queue").text


def test_an_episode_symlinked_out_is_an_unreadable_row(backend: Backend,
                                                     planted_runs: dict[str, str]) -> None:
    """In the episode list, episode 1 (not in summary.json) symlinked out is shown as
    unreadable, with nothing of the file it points at."""
    http = backend.http()
    for plant in ("episodes/ep0001/episode.json", "episodes/ep0001"):
        rows = http.get(f"/runs/{planted_runs[plant]}/episodes").json()
        assert [r["status"] for r in rows] == ["ok", "unreadable"], plant
        assert "symlink out of the outputs root" in rows[1]["error"]


def test_episode_events_never_read_a_symlinked_file(tmp_path: Path) -> None:
    """The scheduler's episode watcher reads episode.json for ``/events``: never through a
    symlink out of the run dir."""
    run = tmp_path / "run"
    (run / "episodes" / "ep0000").mkdir(parents=True)
    watcher = EpisodeWatcher()
    watcher.watch("r", run)
    secret = tmp_path / "secret-episode.json"
    secret.write_text(json.dumps({"episode_index": 0, "status": SYMLINK_SECRET}))
    (run / "episodes" / "ep0000" / "episode.json").symlink_to(secret)
    assert watcher.scan() == []
    (run / "episodes" / "ep0000" / "episode.json").unlink()
    write_json_atomic(run / "episodes" / "ep0000" / "episode.json",
                      {"episode_index": 0, "status": "ok"})
    assert [e.status for e in watcher.scan()] == ["ok"]
