"""evaltui/cli.py: only the invoked command's module is imported; help still lists all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaltui.cli import COMMAND_MODULES, MODULE_OF, build_parser, invoked_command, main

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "pydantic", "textual", "httpx", "rich", "fastapi", "evaltui.contract.views",
         "evaltui.results", "evaltui.api")


def loaded_after(code: str) -> set[str]:
    """sys.modules after running ``code`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; json.dump(sorted(sys.modules), "
         "sys.stdout)"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_importing_the_cli_loads_no_command_module_and_nothing_heavy() -> None:
    loaded = loaded_after("import evaltui.cli")
    assert heavy(loaded) == []
    commands = {m for m in loaded if m.startswith("evaltui.commands.")}
    # the global options, and the one module every command speaks through (no Rich yet)
    assert commands == {"evaltui.commands.tui", "evaltui.commands.console"}


def test_parsing_eval_imports_its_module_alone() -> None:
    loaded = loaded_after("from evaltui.cli import build_parser, MODULE_OF\n"
                          "build_parser([MODULE_OF['eval']]).parse_args(['eval', 'bot'])")
    commands = {m for m in loaded if m.startswith("evaltui.commands.")}
    # its own module and the two it is made of: console lines, following the run
    assert commands == {"evaltui.commands.tui", "evaltui.commands.eval",
                        "evaltui.commands.console", "evaltui.commands.runfollow"}
    # Not even pydantic: eval starts its run process right after parsing.
    assert heavy(loaded) == []


def test_eval_help_still_names_the_spec_s_default_step_budget(
        capsys: pytest.CaptureFixture[str]) -> None:
    from evaltui.contract.spec import DEFAULT_STEP_BUDGET

    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"576 on GoTo/GoToObjMaze -- else {DEFAULT_STEP_BUDGET})" in help_text


@pytest.mark.parametrize(("argv", "command"), [
    (["eval", "bot", "--workers", "4"], "eval"),
    (["--theme", "eval", "ls"], "ls"),  # "eval" is the theme's value here
    (["--theme=light", "--api-port", "0", "demo"], "demo"),
    (["show", "RUN"], "show"),
    (["bogus", "eval"], None),
    (["--", "eval"], None),
    (["--attach", "http://x"], None),
    ([], None),
])
def test_invoked_command(argv: list[str], command: str | None) -> None:
    assert invoked_command(argv) == command


def test_every_command_has_its_module_and_parses() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert set(subparsers.choices) == set(MODULE_OF)
    for module, commands in COMMAND_MODULES.items():
        lazy = build_parser([module])
        lazy_sub = next(a for a in lazy._actions if a.dest == "command")
        assert set(lazy_sub.choices) == set(commands)


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()
              if line.startswith("    ") and not line.startswith("     ")}
    assert listed == set(MODULE_OF)


def test_an_unknown_command_names_the_real_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["evl", "bot"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'evl'" in err
    for command in MODULE_OF:
        assert f"'{command}'" in err


def test_a_command_s_own_options_still_parse() -> None:
    args = build_parser([MODULE_OF["eval"]]).parse_args(
        ["--theme", "light", "eval", "bot", "--workers", "4", "--set", "env.x=1"])
    assert (args.command, args.target, args.workers, args.set, args.theme) == (
        "eval", "bot", 4, ["env.x=1"], "light")


def test_report_takes_out_as_well_as_output() -> None:
    """``--out`` stays an exact name: report's ``--outputs`` made the abbreviation of
    ``--output`` ambiguous (a script's ``evaltui report RUN --out DIR`` broke)."""
    args = build_parser([MODULE_OF["report"]]).parse_args(["report", "RUN", "--out", "site"])
    assert args.output == "site"


def test_a_command_only_argparse_finds_still_gets_its_own_parser(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--them`` (argparse's abbreviation of ``--theme``) hides ``eval`` from the quick
    scan, so the commands are listed by name alone first; the command's own parser still
    parses its options."""
    assert invoked_command(["--them", "light", "eval", "--help"]) is None
    with pytest.raises(SystemExit) as exc:
        main(["--them", "light", "eval", "--help"])
    assert exc.value.code == 0
    assert "--workers" in capsys.readouterr().out


def test_help_imports_no_command_module() -> None:
    loaded = loaded_after("import contextlib\nfrom evaltui.cli import main\n"
                          "with contextlib.suppress(SystemExit):\n    main(['--help'])")
    commands = {m for m in loaded if m.startswith("evaltui.commands.")}
    assert commands == {"evaltui.commands.tui", "evaltui.commands.console"}
    assert heavy(loaded) == []
