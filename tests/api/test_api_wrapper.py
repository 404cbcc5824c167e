"""``evaltui run PROFILE -- CMD`` and ``evaltui teardown`` as users run them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from apihelpers import wait_until
from proctools import kill_group

from evaltui.api.client import ApiClient, ApiError
from evaltui.cli import main
from evaltui.contract.pidref import PidRef
from evaltui.rundir.jsonfiles import read_json
from evaltui.scheduler.admission.ledger import Ledger

Popen = Callable[..., subprocess.Popen[Any]]
STAMP = ('echo "$1 start $(date +%s.%N)" >> "$2"; sleep {sleep}; '
         'echo "$1 end $(date +%s.%N)" >> "$2"')


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Two ports nothing listens on, as the wrappers' pool."""
    ports = []
    socks = [socket.socket() for _ in range(2)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
        ports.append(sock.getsockname()[1])
    for sock in socks:
        sock.close()
    monkeypatch.setenv("EVALTUI_PORT_POOL", ",".join(map(str, ports)))
    return ports


def _wrapper(popen: Popen, profile: str, *cmd: str, cwd: Path | None = None,
             extra: tuple[str, ...] = ()) -> subprocess.Popen[Any]:
    return popen([sys.executable, "-m", "evaltui.cli", "run", *extra, profile, "--", *cmd],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def _intervals(log: Path) -> dict[str, tuple[float, float]]:
    stamps: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        name, what, at = line.split()
        stamps.setdefault(name, {})[what] = float(at)
    return {name: (s["start"], s["end"]) for name, s in stamps.items()}


def test_exclusive_wrappers_run_one_after_the_other(popen: Popen, pool: list[int],
                                                     tmp_path: Path, api_env: dict) -> None:
    log = tmp_path / "stamps.log"
    script = STAMP.format(sleep=1)
    wrappers = [_wrapper(popen, "whole", "sh", "-c", script + "; exit 7", "sh", name, str(log))
                for name in ("A", "B")]
    outs = [w.communicate(timeout=60) for w in wrappers]
    assert [w.returncode for w in wrappers] == [7, 7], outs  # CMD's exit code passes through
    (a_start, a_end), (b_start, b_end) = sorted(_intervals(log).values())
    assert a_end <= b_start, "the two exclusive commands overlapped"
    errs = "".join(err for _, err in outs)
    assert "a whole GPU, exclusive" in errs and "waiting for exclusive use of GPU0" in errs
    # One backend served both, started by the first wrapper, on the first port of the pool.
    pid_files = list((api_env["state"] / "backends").glob("*.pid"))
    assert [p.name for p in pid_files] == [f"{pool[0]}.pid"]
    with ApiClient(f"http://127.0.0.1:{pool[0]}") as client:
        admits = client.list_admits()
        assert [a.state.value for a in admits] == ["released", "released"]
        assert client.resources().ledger == []


def test_cmd_sees_backend_url_and_its_gpu(popen: Popen, pool: list[int], tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    w = _wrapper(popen, "any", "sh", "-c",
                 f'echo "$BACKEND_URL $CUDA_VISIBLE_DEVICES $EVALTUI_ADMIT_ID" > {out}')
    _, err = w.communicate(timeout=60)
    assert w.returncode == 0, err
    url, gpu, admit_id = out.read_text().split()
    assert url == f"http://127.0.0.1:{pool[0]}" and gpu == "0" and len(admit_id) == 12


def test_profiles_file_and_its_errors(popen: Popen, pool: list[int], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "profiles.yaml").write_text("small:\n  marginal_vram_mb: 4000\n  priority: 3\n")
    w = _wrapper(popen, "small", "true", cwd=tmp_path)  # ./profiles.yaml
    _, err = w.communicate(timeout=60)
    assert w.returncode == 0 and "4000 MiB, priority 3" in err and "admitted on GPU0" in err
    for text, message in [("oops:\n  exclusive_gpu: maybe\n", "profile 'oops': exclusive_gpu"),
                          ("ok: {}\nbad:\n  marginal_vram_mb: -1\n",
                           "profile 'bad': marginal_vram_mb"),
                          ("x:\n  vram: 1\n", "profile 'x': vram"),
                          ("- a\n- b\n", "must map profile names"),
                          ("a: [\n", "not valid YAML")]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        # In-process: a bad profiles file is refused before anything starts.
        assert main(["run", "--profiles", str(bad), "ok", "--", "true"]) == 2
        assert message in capsys.readouterr().err
    assert main(["run", "--profiles", str(tmp_path / "missing.yaml"), "x", "--", "true"]) == 2
    assert "no such profiles file" in capsys.readouterr().err
    assert main(["run", "x"]) == 2 and "no command" in capsys.readouterr().err
    w = _wrapper(popen, "x", "no-such-command-anywhere")
    _, err = w.communicate(timeout=60)
    assert w.returncode == 127 and "cannot run" in err


def test_sigkilled_wrapper_leaves_no_reservation(popen: Popen, pool: list[int],
                                                 tmp_path: Path) -> None:
    marker = tmp_path / "cmd.pid"
    victim = _wrapper(popen, "whole", "sh", "-c", f"echo $$ > {marker}; sleep 60")
    wait_until(lambda: marker.exists() and marker.read_text().strip(), what="CMD to start")
    cmd = PidRef.of(int(marker.read_text()))
    # The reservation is handed to the command, which leads its own session.
    wait_until(lambda: [r.holder_pid for r in Ledger().entries()] == [cmd.pid],
               what="the reservation to be bound to CMD")
    waiter = _wrapper(popen, "whole", "true")
    wait_until(lambda: _waiting(pool[0]), what="the second wrapper to wait")
    os.kill(victim.pid, signal.SIGKILL)
    wait_until(lambda: not cmd.alive(), what="CMD to die with its wrapper")
    _, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    with Ledger().transaction() as txn:
        assert txn.entries == []


def _waiting(port: int) -> bool:
    with ApiClient(f"http://127.0.0.1:{port}") as client:
        return any(a.state.value == "waiting" for a in client.list_admits())


def test_sigterm_is_forwarded_and_ctrl_c_leaves_the_queue(popen: Popen, pool: list[int],
                                                          tmp_path: Path) -> None:
    started, got = tmp_path / "started", tmp_path / "got-term"
    running = _wrapper(popen, "whole", "sh", "-c",
                       f"trap 'echo TERM > {got}; exit 42' TERM; touch {started}; "
                       "while true; do sleep 0.05; done")
    wait_until(started.exists, what="CMD to start")
    queued = _wrapper(popen, "whole", "sh", "-c", f"touch {tmp_path / 'never'}")
    wait_until(lambda: _waiting(pool[0]), what="the second wrapper to wait")
    queued.send_signal(signal.SIGINT)
    _, err = queued.communicate(timeout=30)
    assert queued.returncode == 130 and "left the queue" in err
    running.send_signal(signal.SIGTERM)
    _, err = running.communicate(timeout=30)
    assert running.returncode == 42 and got.read_text().strip() == "TERM"
    assert not (tmp_path / "never").exists()
    with ApiClient(f"http://127.0.0.1:{pool[0]}") as client:
        assert {a.state.value for a in client.list_admits()} == {"released"}
        assert client.resources().ledger == []


def test_teardown_stops_only_what_run_started(popen: Popen, pool: list[int], api_env: dict,
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # A backend started by hand: no pid file, never touched.
    manual = popen([sys.executable, "-m", "evaltui.cli", "serve", "--port", "0"],
                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert "listening on" in manual.stdout.readline()
    started = tmp_path / "started"
    busy = _wrapper(popen, "whole", "sh", "-c", f"touch {started}; sleep 60")
    wait_until(started.exists, what="CMD to start")
    pid_file = read_json(api_env["state"] / "backends" / f"{pool[0]}.pid")
    backend = PidRef(pid_file["pid"], pid_file["create_time"])
    assert main(["teardown"]) == 0
    assert "in use" in capsys.readouterr().out and backend.alive()
    busy.send_signal(signal.SIGTERM)
    busy.communicate(timeout=30)
    assert main(["teardown", "--json"]) == 0
    assert '"outcome": "stopped"' in capsys.readouterr().out
    assert not backend.alive()
    assert manual.poll() is None  # the hand-started backend is untouched
    assert not list((api_env["state"] / "backends").glob("*.pid"))
    assert main(["teardown"]) == 0
    assert "no backends started by `evaltui run`" in capsys.readouterr().out


def test_foreign_port_is_skipped(popen: Popen, pool: list[int], tmp_path: Path) -> None:
    """A port held by something that is not our backend: the next port of the pool."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", pool[0]))  # bound, not answering
        out = tmp_path / "url"
        w = _wrapper(popen, "any", "sh", "-c", f'echo "$BACKEND_URL" > {out}')
        _, err = w.communicate(timeout=60)
    assert w.returncode == 0, err
    assert out.read_text().strip() == f"http://127.0.0.1:{pool[1]}"


def test_a_restarted_backend_keeps_a_waiting_wrapper(popen: Popen, pool: list[int],
                                                     tmp_path: Path, api_env: dict) -> None:
    started = tmp_path / "started"
    busy = _wrapper(popen, "whole", "sh", "-c", f"touch {started}; sleep 60")
    wait_until(started.exists, what="the first command to start")
    waiter = _wrapper(popen, "whole", "true")
    [entry] = wait_until(lambda: [a for a in _admits(pool[0]) if a.state.value == "waiting"],
                         what="the second wrapper to wait")
    pid_file = read_json(api_env["state"] / "backends" / f"{pool[0]}.pid")
    kill_group(pid_file["pid"])  # the backend dies; the first command runs on, still reserved
    wait_until(lambda: not PidRef(pid_file["pid"], pid_file["create_time"]).alive(),
               what="the backend to die")
    # The waiting wrapper brings a backend up again; it takes the entries over from disk.
    restored = wait_until(lambda: _admits(pool[0]), timeout=60, what="a new backend")
    assert {a.admit_id: a.state.value for a in restored}[entry.admit_id] == "waiting"
    busy.send_signal(signal.SIGTERM)
    busy.communicate(timeout=30)
    _, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert err.count("queued as") == 1 and f"{entry.admit_id} kept its place" in err
    with ApiClient(f"http://127.0.0.1:{pool[0]}") as client:
        assert {a.state.value for a in client.list_admits()} == {"released"}
        assert client.resources().ledger == []
    assert not list((api_env["state"] / "admits").glob("*.json"))


def _admits(port: int) -> list[Any]:
    try:
        with ApiClient(f"http://127.0.0.1:{port}") as client:
            return client.list_admits()
    except ApiError:
        return []
