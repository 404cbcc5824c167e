"""``evaltui demo``: the TUI with three runs of the built-in benchmark queued, and a fourth,
Meta-World's experts on MT10, where ``evaltui[metaworld]`` is installed.

No GPU is needed: without NVML the demo declares one fake 24 GiB GPU
(``EVALTUI_FAKE_GPUS=1x24576``, inherited by the runs it spawns). The first two runs
each declare 14 GiB of VRAM, so the second waits for the first: a newcomer sees a
waiting reason, an admission, live per-episode tables and, once episodes finish,
replays, all within a minute.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from contextlib import ExitStack, closing
from typing import Any

from evaltui.commands.console import note as say_note
from evaltui.commands.console import warning
from evaltui.contract.settings import settings
from evaltui.contract.spec import SpecError
from evaltui.engine.graph.specbuild import build_spec
from evaltui.graphs import builtin_graph_names
from evaltui.rundir.layout import outputs_root
from evaltui.scheduler.admission import resources
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.tui.embedded import EmbeddedBackend

FAKE_GPU = "1x24576"
DEMO_VRAM_MB = 14 * 1024


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo",
                       description="Queue three BabyAI runs (bot, noisy bot, and the shipped "
                       "model when present) and open the TUI on them.")
    # SUPPRESS: given after `demo` they win, else the same options given before it stay.
    p.add_argument("--theme", default=argparse.SUPPRESS, help="TUI theme (default evaltui-dark)")
    p.add_argument("--outputs", default=argparse.SUPPRESS,
                   help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--api-port", type=int, default=argparse.SUPPRESS,
                   help="serve the HTTP API on 127.0.0.1:PORT (default 8000; 0 = off)")
    p.add_argument("--episodes", type=int, default=None,
                   help="episodes per run (default: 100, 300 and 200)")
    p.set_defaults(func=run)


def demo_specs(episodes: int | None = None) -> list[dict[str, Any]]:
    """The three JobSpecs the demo queues, in submit order."""
    workspace = os.getcwd()

    def spec(graph: str, split: str, count: int, dataset: str = "babyai",
             **scheduling: Any) -> dict[str, Any]:
        built = build_spec(graph, dataset=dataset, split=split, episodes=episodes or count,
                           workers=2, workspace=workspace)
        built["scheduling"] = scheduling
        return built

    model = next((name for name in builtin_graph_names() if "model" in name), None)
    third = spec(model, "GoToLocal", 200, marginal_vram_mb=4096) if model else \
        spec("bot", "GoToLocal", 200, exclusive_gpu=True, priority=-1)
    specs = [spec("bot", "GoTo", 100, marginal_vram_mb=DEMO_VRAM_MB, priority=1),
             spec("noisy_bot", "GoToObjMaze", 300, marginal_vram_mb=DEMO_VRAM_MB), third]
    if importlib.util.find_spec("metaworld") is not None:  # evaltui[metaworld] installed
        specs.append(spec("mw_expert", "MT10", 50, dataset="metaworld", marginal_vram_mb=1024))
    return specs


def ensure_gpu() -> str | None:
    """Declare a fake GPU when there is no real one; returns a note saying so, if done."""
    if settings().fake_gpus:
        return None
    with closing(resources.NvmlProbe()) as probe:
        if probe.read().available:
            return None
    os.environ["EVALTUI_FAKE_GPUS"] = FAKE_GPU
    return "demo: fake GPU"  # the resources panel says its size; short for 80 columns


def run(args: argparse.Namespace) -> int:
    note = ensure_gpu()
    # start-up: Textual (~1 s) loads once a screen opens: --help imports every command
    from evaltui.commands.tuiapp import run_app, serve_api

    outputs = outputs_root(args.outputs)
    scheduler = JobScheduler(outputs)
    backend = EmbeddedBackend(scheduler)
    services = ExitStack()
    specs = demo_specs(args.episodes)

    def queue_runs() -> None:
        api = serve_api(scheduler, args.api_port, services)
        backend.api_note = " · ".join(n for n in (note, api) if n)
        for spec in specs:
            try:
                run_id, _ = backend.submit(spec)
            except SpecError as exc:
                warning(f"cannot queue {spec['graph'].get('name')}: {exc}")
            else:
                print(f"queued {run_id}", file=sys.stderr)

    say_note(f"outputs in {outputs}")
    return run_app(backend, args.theme, before_run=queue_runs, services=services)
