"""Path traversal in run_id and episode index never reads outside the outputs root."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from apihelpers import Backend

from evaltui.api.models import API_PREFIX
from evaltui.rundir import runs_root, write_json_atomic

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
