"""The port pool of ``evaltui run``: parsed and range-checked, a bad one is a one-line error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaltui.wrapper.ports import PortPoolError, parse_pool, port_pool

_CLI = "import sys; from evaltui.cli import main; sys.exit(main())"


def test_good_pools() -> None:
    assert parse_pool("8765-8769") == [8765, 8766, 8767, 8768, 8769]
    assert parse_pool("8765, 8767,9000-9001") == [8765, 8767, 9000, 9001]
    assert parse_pool("8765,8765-8766") == [8765, 8766]  # each port once
    assert parse_pool("1024-1024") == [1024] and parse_pool("65535") == [65535]
    assert parse_pool("80", allow_privileged=True) == [80]


@pytest.mark.parametrize(("spec", "says"), [
    ("18192-18191", "not ordered"), ("abc", "not a port"), ("80", "privileged"),
    ("1-2", "privileged"), ("0", "outside 1024-65535"), ("70000", "outside"),
    ("8765-", "not a port"), ("-5", "not a port"), ("", "empty"), (",", "empty"),
    ("8765,,8766", "not a port"), ("٣٣٣٣", "not a port"), ("1e4", "not a port"),
    ("1024-65535", "more than"),
])
def test_bad_pools_name_the_term(spec: str, says: str) -> None:
    with pytest.raises(PortPoolError, match=says) as caught:
        parse_pool(spec)
    assert "\n" not in str(caught.value)


def test_the_environment_pool_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_PORT_POOL", "18192-18191")
    with pytest.raises(PortPoolError, match="^EVALTUI_PORT_POOL: "):
        port_pool()
    monkeypatch.delenv("EVALTUI_PORT_POOL")
    assert port_pool() == list(range(8765, 8770))


@pytest.mark.parametrize(("env", "args", "says"), [
    ("18192-18191", [], "EVALTUI_PORT_POOL: '18192-18191' is not ordered"),
    ("abc", [], "EVALTUI_PORT_POOL: 'abc' is not a port"),
    ("80", [], "EVALTUI_PORT_POOL: '80' is outside 1024-65535"),
    (None, ["--ports", "80"], "--ports: '80' is outside 1024-65535"),
])
def test_evaltui_run_exits_2_with_one_line(tmp_path: Path, env: str | None, args: list[str],
                                           says: str) -> None:
    """Bad port pools exit 2 with one line (no traceback; ``=80`` starts nothing on 80)."""
    environ = dict(os.environ)
    environ.pop("EVALTUI_PORT_POOL", None)
    if env is not None:
        environ["EVALTUI_PORT_POOL"] = env
    proc = subprocess.run([sys.executable, "-c", _CLI, "run", *args, "anyprofile", "--", "true"],
                          capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {says}") and "Traceback" not in proc.stderr
    assert not (Path(environ["EVALTUI_STATE_DIR"]) / "backends").exists()  # nothing started
