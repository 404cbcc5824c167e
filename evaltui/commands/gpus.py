"""``evaltui gpus``: per GPU, the processes holding memory and whose they are (nvitop's view).

No backend needed: the GPUs are read here (NVML, or the fake GPUs of
``EVALTUI_FAKE_GPUS``) and each process is matched against the outputs root's unfinished
runs and the shared nodeset hosts (:mod:`evaltui.gpu.holders`). Text fits the terminal
(80 columns when piped); ``--format json`` is for scripts. Exit 1, with one line on
stderr, when no GPU can be read (no NVML, no driver).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from contextlib import closing
from typing import Any

from evaltui.commands.console import error
from evaltui.gpu.holders import GpuHolder, gpu_holders, live_run_dirs
from evaltui.rundir.layout import outputs_root, runs_root
from evaltui.scheduler.admission.resources import make_gpu_probe

PIPED_WIDTH = 80


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpus",
                       description="Per GPU, the processes holding memory (pid, user, MiB) "
                       "and which run or shared nodeset each one is, read from NVML (or the "
                       "fake GPUs of EVALTUI_FAKE_GPUS). Needs no running backend.")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default, fits the terminal) or json")
    # SUPPRESS: given after `gpus` it wins, else the global --outputs stays.
    p.add_argument("--outputs", default=argparse.SUPPRESS,
                   help="outputs root whose runs to match (default $EVALTUI_OUTPUTS or "
                   "./outputs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with closing(make_gpu_probe()) as probe:
        reading = probe.read()
    if not reading.available:
        return error(f"no GPU to show: {reading.reason} (EVALTUI_FAKE_GPUS=1x24576 "
                     "declares a fake one)", 1)
    root = runs_root(outputs_root(getattr(args, "outputs", None)))
    holders = gpu_holders(reading.gpus, run_dirs=live_run_dirs(root))
    if args.format == "json":
        print(json.dumps([_gpu_json(g, holders.get(int(g.index))) for g in reading.gpus],
                         indent=2))
        return 0
    width = shutil.get_terminal_size((PIPED_WIDTH, 24)).columns if sys.stdout.isatty() \
        else PIPED_WIDTH
    for line in gpu_lines(reading.gpus, holders, width):
        print(line)
    return 0


def _gpu_json(gpu: Any, holders: list[GpuHolder] | None) -> dict[str, Any]:
    return {"gpu": int(gpu.index), "name": gpu.name, "total_mb": gpu.total_mb,
            "used_mb": gpu.used_mb,
            "processes": None if holders is None else [h.to_json() for h in holders]}


def gpu_lines(gpus: Sequence[Any], holders: dict[int, list[GpuHolder] | None],
              width: int) -> list[str]:
    """The text table: a heading per GPU, then a line per process, none wider than
    ``width`` (the run id or nodeset is cut last: pid, user and MiB come first)."""
    lines: list[str] = []
    for gpu in gpus:
        lines.append(_fit(f"GPU{gpu.index}  {gpu.name}  {gpu.used_mb:,} / {gpu.total_mb:,} "
                          "MiB used", width))
        found = holders.get(int(gpu.index))
        if found is None:
            lines.append("  (the driver does not attribute memory to processes)")
            continue
        if not found:
            lines.append("  no processes")
            continue
        lines.append(_fit(f"  {'PID':>8}  {'USER':<10}  {'MiB':>8}  WHAT", width))
        for h in found:
            lines.append(_fit(f"  {h.pid:>8}  {_cut(h.user or '?', 10):<10}  "
                              f"{h.used_mb:>8,}  {h.what}", width))
    return lines


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fit(line: str, width: int) -> str:
    return _cut(line, max(20, width))
