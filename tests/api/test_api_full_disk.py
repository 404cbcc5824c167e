"""``POST /runs`` on a full outputs disk: 507 with a clear body, nothing left behind.

The outputs root is a small tmpfs filled to the last byte (root only; skipped elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from apihelpers import Backend, bot_spec

from evaltui.rundir.layout import runs_root


def test_submit_on_a_full_outputs_disk_is_507_and_leaves_no_run_dir(
        make_backend: Callable[..., Backend], small_disk,
        monkeypatch: pytest.MonkeyPatch) -> None:
    disk = small_disk("outputs", "1m")
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(disk.path))
    backend = make_backend()
    runs_root(disk.path).mkdir(parents=True, exist_ok=True)
    disk.fill()
    http = backend.http()
    answer = http.post("/runs", json=bot_spec())
    assert answer.status_code == 507, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith("disk full: cannot write a run dir under") and str(disk.path) in \
        detail and "No space left on device" in detail, detail
    assert list(runs_root(disk.path).iterdir()) == []  # no empty run dir listed as aborted
    assert http.get("/runs").json() == []
    disk.free()
    assert http.post("/runs", json=bot_spec()).status_code == 201
    assert len(list(runs_root(disk.path).iterdir())) == 1
