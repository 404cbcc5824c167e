"""``GET /queue`` holds eval runs and `evaltui run` commands in one order, each saying what
it is; the typed client and ``evaltui ls`` show both."""

from __future__ import annotations

import httpx
from apihelpers import bot_spec, wait_until

from evaltui import cli
from evaltui.contract.pidref import PidRef

COMMAND = "python train.py --lr 3e-4"


def test_queue_entries_say_their_kind_and_ls_lists_waiting_commands(make_backend, capsys,
                                                                    monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per row in the ls table
    backend = make_backend()
    client = backend.client()
    client.lock("tester", 120)  # nothing is admitted: both wait in the one queue
    run_id = client.submit(bot_spec(1)).run_id
    me = PidRef.current()
    admit = client.create_admit("train", me.pid, me.create_time, marginal_vram_mb=1024,
                                exclusive_gpu=False, priority=3, command=COMMAND)
    # Reasons are the tick's (1 Hz): until it has seen both, one still says "next tick".
    queue = wait_until(lambda: q if len(q := client.queue()) == 2 and all(
        "interactive lock" in e.waiting_reason for e in q) else None,
        what="two entries the tick held back for the lock")
    first, second = queue
    # One priority order: the command (priority 3) is ahead of the run (priority 0).
    assert (first.kind, first.run_id, first.label, first.command, first.estimate_mb) == \
        ("admit", f"admit:{admit.admit_id}", "train", COMMAND, 1024)
    assert (second.kind, second.run_id, second.label, second.command) == \
        ("run", run_id, None, None)
    assert "interactive lock" in first.waiting_reason
    schema = httpx.get(f"{backend.url}/openapi.json", timeout=30, headers={
        "Authorization": f"Bearer {backend.token}"}).json()["components"]["schemas"]
    assert schema["QueueEntry"]["properties"]["kind"]["enum"] == ["run", "admit"]

    assert cli.main(["ls", "--url", backend.url]) == 0
    out = capsys.readouterr().out
    admit_line = next(line for line in out.splitlines() if first.run_id in line)
    assert "queued" in admit_line and "train" in admit_line and "python train.py" in admit_line
    assert run_id in out
    assert cli.main(["ls", "--url", backend.url, "--state", "done"]) == 0
    assert capsys.readouterr().out == "no runs in state done\n"  # a waiting command is queued
    client.release_admit(admit.admit_id)
    client.unlock("tester")
