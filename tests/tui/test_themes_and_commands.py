"""Themes as data, display helpers, and the TUI's commands (replay, demo); --attach is
in test_attach.py."""

from __future__ import annotations

import importlib.util
import json
import socket
import zipfile
from contextlib import ExitStack
from pathlib import Path

import pytest
from rich.style import Style
from tuihelpers import SIZE, wait_for

from evaltui.cli import main
from evaltui.commands import demo as demo_cmd
from evaltui.engine.graph.specchecks import validate_spec
from evaltui.graphs import builtin_graph_names, builtin_graph_path
from evaltui.tui import display
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.themes import (
    ThemeError,
    builtin_themes_dir,
    load_theme,
    load_themes,
    resolve_theme_name,
)
from evaltui.tui.widgets.bars import stacked_bar

SHIPPED = {"evaltui-dark", "evaltui-light", "evaltui-high-contrast"}


def test_shipped_themes_load() -> None:
    themes = {t.name: t for t in load_themes()}
    assert SHIPPED <= set(themes)
    assert not themes["evaltui-light"].dark and themes["evaltui-dark"].dark


def test_theme_names_resolve(tmp_path: Path) -> None:
    names = SHIPPED | {"textual-dark"}
    assert resolve_theme_name("light", names) == "evaltui-light"
    assert resolve_theme_name("textual-dark", names) == "textual-dark"
    with pytest.raises(ThemeError, match="choose one of"):
        resolve_theme_name("neon", names)


def test_a_bad_theme_file_names_its_fault(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('primary = "#FFFFFF"\nsparkle = true\n')
    with pytest.raises(ThemeError, match="sparkle"):
        load_theme(bad)
    (tmp_path / "ok.toml").write_text('primary = "#123456"\n')
    assert load_theme(tmp_path / "ok.toml").name == "evaltui-ok"


def test_builtin_themes_come_from_the_top_level_themes_folder() -> None:
    """The repository's themes/ is the package evaltui._themes (so also in the wheel)."""
    root = Path(__file__).resolve().parents[2]
    assert builtin_themes_dir().resolve() == (root / "themes").resolve()
    assert {p.stem for p in (root / "themes").glob("*.toml")} == {"dark", "light",
                                                                   "high-contrast"}
    assert not (root / "evaltui" / "themes").exists()


def _user_themes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: dict[str, str]) -> Path:
    monkeypatch.setenv("EVALTUI_CONFIG_DIR", str(tmp_path / "config"))
    directory = tmp_path / "config" / "themes"
    directory.mkdir(parents=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


OCEAN = 'primary = "#0077BE"\nbackground = "#001F3F"\ndark = true\n'


def test_a_user_theme_is_offered_by_theme_and_the_palette(
        runs, app_factory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import asyncio

    from textual.command import CommandList, CommandPalette

    _user_themes(monkeypatch, tmp_path, {"ocean.toml": OCEAN})
    assert app_factory(run_dir=runs["done"], theme="ocean").theme == "evaltui-ocean"
    app = app_factory(run_dir=runs["done"])
    assert app.theme == "evaltui-dark" and app.theme_problems == []

    async def drive() -> None:
        async with app.run_test(size=SIZE) as pilot:
            app.action_change_theme()
            await wait_for(lambda: isinstance(app.screen, CommandPalette))
            await pilot.press(*"ocean")
            hits = app.screen.query_one(CommandList)
            await wait_for(lambda: any("evaltui-ocean" in str(hits.get_option_at_index(i).prompt)
                                       for i in range(hits.option_count)))
            await pilot.press("enter")
            await wait_for(lambda: app.theme == "evaltui-ocean")

    asyncio.run(drive())


def test_a_broken_user_theme_is_one_line_not_a_crash(
        runs, app_factory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    import asyncio

    from evaltui.rundir.layout import episode_dir

    directory = _user_themes(monkeypatch, tmp_path, {
        "ocean.toml": OCEAN, "typo.toml": 'primary = "#0077BE\n', "pink.toml": 'primary = "pnk"\n',
        "numbers.toml": "primary = 5\n"})
    app = app_factory(run_dir=runs["done"])
    assert "evaltui-ocean" in app.available_themes  # the good file still loads
    problems = app.theme_problems
    assert [p.split(":")[0] for p in problems] == [
        f"theme file {directory}/{name}" for name in ("numbers.toml", "pink.toml", "typo.toml")]
    assert all("\n" not in p and p.endswith("(skipped)") for p in problems)
    assert "pnk" in problems[1] and "primary" in problems[0]

    async def drive() -> None:
        async with app.run_test(size=SIZE):
            await wait_for(lambda: len(app._notifications) == 3)
            assert sorted(n.message for n in app._notifications) == sorted(problems)

    asyncio.run(drive())
    # On the command line: asking for a broken theme says which file and why, in one line.
    assert main(["replay", str(episode_dir(runs["done"], 0)), "--theme", "pink"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown theme 'pink'" in err and "pink.toml" in err


@pytest.mark.anyio
@pytest.mark.parametrize("theme", sorted(SHIPPED))
async def test_each_theme_renders_and_switches(theme: str, runs, app_factory) -> None:
    app = app_factory(run_dir=runs["done"], theme=theme)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.screen.query_one("EpisodesTable").row_count == 20)
        app.theme = "evaltui-light" if theme != "evaltui-light" else "evaltui-dark"
        await pilot.pause()
        assert app.screen.query_one("EpisodesTable").row_count == 20


def test_display_helpers() -> None:
    assert display.mib(512) == "512 MiB" and display.mib(20480) == "20.0 GiB"
    assert display.duration(0.5) == "0.50 s" and display.duration(185) == "3m05s"
    assert display.duration(7300) == "2h01m" and display.age(45) == "45s"
    assert display.age(7200) == "2h" and display.age(None) == display.NONE
    assert display.interval([0.1, 0.2], 2) == "[0.10, 0.20]" and display.interval(None) == "—"
    trace = "Traceback (most recent call last):\n  File x\nValueError: boom"
    assert display.first_line(trace) == "ValueError: boom"


def test_stacked_bar_resolves_eighths() -> None:
    red, blue, grey = Style(color="red"), Style(color="blue"), Style(color="grey50")
    bar = stacked_bar(10, [(2.5, red), (2.5, blue)], 10, grey)
    assert bar.cell_len == 10
    assert bar.plain == "██▌██░░░░░"  # red ends mid-cell 2, on a blue background
    assert stacked_bar(4, [(100, red)], 10, grey).plain == "████"  # clipped, never wider


def test_replay_command_refuses_a_non_episode_dir(tmp_path: Path, capsys) -> None:
    assert main(["replay", str(tmp_path)]) == 2
    assert "not an episode dir" in capsys.readouterr().err


def test_replay_command_refuses_an_unknown_theme(runs, capsys) -> None:
    from evaltui.rundir.layout import episode_dir

    assert main(["replay", str(episode_dir(runs["done"], 0)), "--theme", "neon"]) == 2
    assert "unknown theme" in capsys.readouterr().err


def test_replay_opens_a_copied_episode_dir(runs, tmp_path: Path) -> None:
    """``evaltui replay`` on an ep dir copied (zipped and unpacked) far from its run."""
    import asyncio
    import shutil

    from evaltui.rundir.layout import episode_dir
    from evaltui.tui.app import make_app

    src = episode_dir(runs["done"], 5)
    archive = shutil.make_archive(str(tmp_path / "ep"), "zip", src.parent, src.name)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path / "copy")
    shutil.rmtree(runs["done"])  # the run is gone: only the copy is left

    async def drive() -> None:
        app = make_app(replay_dir=tmp_path / "copy" / "ep0005")
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, ReplayScreen)
            await wait_for(lambda: screen.indexed and bool(screen.firings))
            assert screen.replay.episode["run_id"] == "20260115_090100"
            await pilot.press("e")
            await wait_for(lambda: screen.step == 2)

    asyncio.run(drive())


def test_demo_specs_validate() -> None:
    specs = demo_cmd.demo_specs(episodes=3)
    with_metaworld = importlib.util.find_spec("metaworld") is not None
    assert len(specs) == 3 + with_metaworld
    if with_metaworld:  # both built-in benchmarks
        assert specs[3]["graph"]["name"] == "metaworld-expert"
        assert specs[3]["eval"]["dataset"] == "metaworld"
    names = [s["graph"]["name"] for s in specs]
    assert names[0] == "babyai-bot" and names[1] == "babyai-noisy-bot"
    if "model" in builtin_graph_names():  # the shipped model, when the package has it
        assert specs[2]["graph"] == json.loads(builtin_graph_path("model").read_text())
    for spec in specs:
        checked = validate_spec(spec)
        assert len(checked.episode_indices) == 3
    assert specs[0]["scheduling"]["marginal_vram_mb"] + \
        specs[1]["scheduling"]["marginal_vram_mb"] > 24576  # the second has to wait


def test_demo_declares_a_fake_gpu_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaltui.scheduler.admission import resources

    class NoNvml:
        def read(self) -> resources.GpuReading:
            return resources.GpuReading(False, "NVML unavailable: test", False, ())

        def close(self) -> None:
            pass

    monkeypatch.setattr(resources, "NvmlProbe", NoNvml)
    assert demo_cmd.ensure_gpu() is not None
    import os
    assert os.environ["EVALTUI_FAKE_GPUS"] == demo_cmd.FAKE_GPU
    assert demo_cmd.ensure_gpu() is None  # already set: left alone


def test_the_api_is_served_beside_the_tui_when_its_port_is_free(outputs: Path) -> None:
    import httpx

    from evaltui.commands.tuiapp import serve_api
    from evaltui.scheduler.scheduler import JobScheduler

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    scheduler = JobScheduler(outputs)
    with ExitStack() as first, ExitStack() as second:
        note = serve_api(scheduler, port, first)
        assert note == f"API: http://127.0.0.1:{port}"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        busy = serve_api(scheduler, port, second)
        assert busy.startswith(f"API: not served, 127.0.0.1:{port} is busy")
    assert serve_api(scheduler, 0, ExitStack()) == "API: off (--api-port 0)"


@pytest.mark.parametrize("argv", [
    ["demo", "--api-port", "0", "--theme", "evaltui-light", "--outputs", "o"],
    ["--api-port", "0", "--theme", "evaltui-light", "--outputs", "o", "demo"],
])
def test_demo_takes_the_tui_options_before_or_after_the_command(argv: list[str]) -> None:
    from evaltui.cli import build_parser

    args = build_parser().parse_args(argv)
    assert (args.api_port, args.theme, args.outputs) == (0, "evaltui-light", "o")
