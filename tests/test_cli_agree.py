"""Commands agree (issue 35, item 10): every command that takes a run or a set takes a
dir or an id; an unknown id is exit 2 with one ``error: `` line in every one of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from botruns import finished_bot_run, nothing_listens_url

from evaltui.cli import main
from evaltui.contract.setspec import MemberState, SetMemberRecord, SetRecord
from evaltui.sets.setdir import set_dir, write_set

SET_ID = "agree"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_bot_run(tmp_path_factory, 2)


@pytest.fixture(scope="module")
def outputs(run_dir: Path) -> Path:
    """The run's outputs root, with a one-member set of that run."""
    root = run_dir.parents[1]
    member = SetMemberRecord(key="0" * 16, axes={"graph": "bot"}, run_id=run_dir.name,
                             state=MemberState.DONE, attempts=1, run_dir=str(run_dir))
    write_set(set_dir(SET_ID, root), SetRecord(set_id=SET_ID, name=SET_ID,
                                               file={"name": SET_ID}, base_dir=str(root),
                                               members=[member]))
    return root


@pytest.mark.parametrize("kind", ["run", "set"])
def test_report_and_export_take_an_id(kind: str, run_dir: Path, outputs: Path,
                                      tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    ref = run_dir.name if kind == "run" else SET_ID
    site = tmp_path / "site"
    assert main(["report", ref, "--outputs", str(outputs), "-o", str(site)]) == 0
    assert (site / "index.html").is_file()
    assert f"report of {kind}" in capsys.readouterr().out
    logs = tmp_path / "tb"
    assert main(["export", ref, "--outputs", str(outputs), "--to", "tensorboard",
                 "--logdir", str(logs)]) == 0
    assert any(logs.rglob("events.out.tfevents.*"))


UNKNOWN_RUN = "20990101_000000"
COMMANDS = {
    "show": ["show", UNKNOWN_RUN],
    "verify": ["verify", UNKNOWN_RUN],
    "compare": ["compare", UNKNOWN_RUN, UNKNOWN_RUN],
    "report": ["report", UNKNOWN_RUN, "-o", "{tmp}/r"],
    "report a set": ["report", "no-such-set", "-o", "{tmp}/r"],
    "export": ["export", UNKNOWN_RUN, "--to", "tensorboard", "--logdir", "{tmp}/tb"],
    "export a set": ["export", "no-such-set", "--to", "tensorboard", "--logdir", "{tmp}/tb"],
    "set show": ["set", "show", "no-such-set"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_an_unknown_id_is_exit_2_and_one_error_line(
        name: str, outputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BACKEND_URL", nothing_listens_url())
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(outputs))
    argv = [a.format(tmp=tmp_path) for a in COMMANDS[name]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and "Traceback" not in err, err
    assert UNKNOWN_RUN in err or "no-such-set" in err


@pytest.mark.parametrize("argv", [
    ["serve", "--host", "0.0.0.0", "--port", "0"],          # no --token-file off loopback
    ["serve", "--port", "70000"],
    ["ledger", "setup", "--group", "evaltui-no-such-group-x"],
])
def test_serve_and_ledger_refuse_in_the_one_prefix_style(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`serve` and `ledger setup` said ``evaltui serve: ...`` where every other command
    says ``error: ...``."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
