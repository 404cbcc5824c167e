"""Reservations for the machine-wide ledger tests: a LedgerEntry held by a given process
(this one by default, so it is alive) for a given Unix user, and adding entries in one
transaction. One place, so a new LedgerEntry field is set once for every test."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from evaltui.contract.pidref import PidRef
from evaltui.contract.views import LedgerEntry
from evaltui.scheduler.admission.ledger import Ledger
from evaltui.scheduler.admission.ledgerfiles import VERSION, entry_filename


def held_entry(run_id: str, *, holder: PidRef | None = None, vram_mb: int = 1000,
               gpu: int | None = 0, outputs: str = "/o", uid: int | None = None) -> LedgerEntry:
    """A reservation whose holder and scheduler are ``holder`` (default: this process) and
    whose maker is ``uid`` (default: this user)."""
    ref = holder or PidRef.current()
    return LedgerEntry(
        run_id=run_id,
        holder_pid=ref.pid,
        holder_create_time=ref.create_time,
        scheduler_pid=ref.pid,
        outputs=outputs,
        gpu=gpu,
        vram_mb=vram_mb,
        ram_mb=0,
        admitted_at=time.time(),
        uid=os.getuid() if uid is None else uid,
    )


def reserve(ledger: Ledger, *entries: LedgerEntry | str) -> None:
    """Add ``entries`` to ``ledger`` in one transaction; a bare run id is ``held_entry(id)``."""
    with ledger.transaction() as txn:
        for entry in entries:
            txn.add(held_entry(entry) if isinstance(entry, str) else entry)


@contextmanager
def another_users_entry(directory: Path, run_id: str, *, vram_mb: int = 1000,
                        outputs: str = "/o") -> Iterator[LedgerEntry]:
    """A reservation of another Unix user in the ledger ``directory``: their own file,
    owned by them, held by a live process of theirs (root only: skips with one line)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to write a ledger file as another user")
    other = os.getuid() + 4242

    def become_other() -> None:
        os.setgid(other)
        os.setuid(other)

    holder = subprocess.Popen(["sleep", "120"], preexec_fn=become_other)
    try:
        entry = held_entry(run_id, holder=PidRef.of(holder.pid), vram_mb=vram_mb,
                           outputs=outputs, uid=other)
        path = directory / entry_filename(other)
        path.write_bytes(orjson.dumps({"version": VERSION, "entries": [entry.model_dump()]}))
        os.chown(path, other, other)
        yield entry
    finally:
        holder.kill()
        holder.wait()
