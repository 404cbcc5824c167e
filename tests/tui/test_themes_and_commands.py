"""Themes as data, display helpers, and the TUI's commands (replay, demo); --attach is
in test_attach.py."""

from __future__ import annotations

import argparse
import json
import socket
import zipfile
from contextlib import ExitStack
from pathlib import Path

import pytest
from rich.style import Style
from tuihelpers import SIZE, wait_for

from evaltui.commands import demo as demo_cmd
from evaltui.commands import replay as replay_cmd
from evaltui.engine.specchecks import validate_spec
from evaltui.graphs import builtin_graph_names, builtin_graph_path
from evaltui.tui import display
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.themes import ThemeError, load_theme, load_themes, resolve_theme_name
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


def test_themes_are_package_data() -> None:
    """pyproject ships themes/*.toml inside the package (so also in the wheel)."""
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"themes/*.toml"' in text


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
    assert replay_cmd.run(argparse.Namespace(ep_dir=str(tmp_path), theme=None)) == 2
    assert "not an episode dir" in capsys.readouterr().err


def test_replay_command_refuses_an_unknown_theme(runs, capsys) -> None:
    from evaltui.rundir import episode_dir

    args = argparse.Namespace(ep_dir=str(episode_dir(runs["done"], 0)), theme="neon")
    assert replay_cmd.run(args) == 2
    assert "unknown theme" in capsys.readouterr().err


def test_replay_opens_a_copied_episode_dir(runs, tmp_path: Path) -> None:
    """``evaltui replay`` on an ep dir copied (zipped and unpacked) far from its run."""
    import asyncio
    import shutil

    from evaltui.rundir import episode_dir
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
    assert len(specs) == 3
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
    from evaltui.scheduler import resources

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

    from evaltui.commands.tui import serve_api
    from evaltui.scheduler import JobScheduler

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
