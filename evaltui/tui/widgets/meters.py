"""Resource meters for the queue screen: one line per GPU, one for the host.

A GPU line shows memory as a stacked bar (used by processes, then reserved by admitted
runs not yet at their peak, then free), coloured by how full the device would be once
reservations land, and the utilisation. Without NVML the panel says so plainly:
admission then uses host RAM and CPU only.

On tall terminals each GPU also shows a short history of its used and reserved memory
(nvitop style), kept here from each new reading so the queue screen need not know.

While a run holds several GPUs (replicas), each GPU also lists its reservations by run.

Under each GPU, the processes holding its memory (pid, user, MiB and which run or
shared nodeset they are, :mod:`evaltui.gpu.holders`), as nvitop lists them: one line
on small terminals (the biggest, with how many more), up to PROCESS_LINES on tall ones.

On a Ray cluster (``--ray``) the GPUs are grouped by node: a line per node (its host RAM
and CPU) with its GPUs under it, then a dim line per node that left the cluster ("gone
12 s ago"). The CPU and RAM lines at the bottom stay the scheduler's own machine's.
"""

from __future__ import annotations

import time
from collections import deque

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive

from evaltui.contract.units import gib
from evaltui.contract.views import Gpu, Host, NodeHost, Resources
from evaltui.gpu.holders import GpuHolder
from evaltui.tui.display import duration
from evaltui.tui.widgets.bars import ThemedWidget, level_variable, stacked_bar, theme_style
from evaltui.tui.widgets.braille import stacked_columns

LABEL_WIDTH = 22
INFO_WIDTH = 56
HISTORY_SAMPLES = 600
"""Readings kept per GPU (10 minutes at the queue's 1 s poll); the plot shows the last
as many as it has columns."""
HISTORY_ROWS = 2
PROCESS_LINES = 4
"""Process lines per GPU from PROCESS_MIN_HEIGHT rows up (one line below that)."""
PROCESS_MIN_HEIGHT = 36
HISTORY_MIN_HEIGHT = 40
"""Terminal rows from which the history is shown: below, the queue needs the room."""


class ResourceMeters(ThemedWidget):
    """Per-GPU memory and utilisation meters, then host CPU and RAM."""

    DEFAULT_CSS = """
    ResourceMeters {
        height: auto;
        padding: 0 1;
    }
    """

    resources: reactive[Resources | None] = reactive(None, layout=True)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.history: dict[int | tuple[str, int], deque[tuple[float, float, float]]] = {}
        """Per GPU index ((node, index) on a cluster): (monotonic time, used fraction,
        reserved fraction), oldest first."""
        self.holders: dict[int, list[GpuHolder] | None] = {}
        """Per local GPU index, its processes and whose they are (set before
        ``resources``, which repaints)."""

    def watch_resources(self, res: Resources | None) -> None:
        if res is None:
            return
        now = time.monotonic()
        for gpu in res.gpus:
            total = max(gpu.total_mb, 1.0)
            samples = self.history.setdefault(_key(gpu), deque(maxlen=HISTORY_SAMPLES))
            samples.append((now, gpu.used_mb / total, gpu.reserved_mb / total))

    @property
    def shows_history(self) -> bool:
        return self.app.size.height >= HISTORY_MIN_HEIGHT

    def render(self) -> Group:
        bar_width = max(10, self.content_size.width - LABEL_WIDTH - INFO_WIDTH - 2)
        grid = _grid(bar_width)
        res = self.resources
        if res is None:
            return Group(Text("probing resources…", style=theme_style(self.app,
                                                                      "foreground-muted")))
        lines: list[Text | Table] = []
        cluster = bool(res.nodes or res.nodes_lost or any(g.node for g in res.gpus))
        if not res.gpus:
            note = (None if res.gpu_available else res.gpu_reason) or "no GPU found"
            if not note.startswith("NVML") and not cluster:
                note = f"NVML unavailable: {note}"
            line = Text("GPU".ljust(LABEL_WIDTH + 1),
                        style=theme_style(self.app, "warning", bold=True))
            line.append(note, style=theme_style(self.app, "warning"))
            line.append(" — admission uses host RAM and CPU only",
                        style=theme_style(self.app, "foreground-muted"))
            line.no_wrap, line.overflow = True, "ellipsis"
            lines.append(line)
        if not cluster:
            # A short screen: one line per set of GPUs holding the same runs, after them
            # (a run on 8 GPUs would otherwise take 8 lines from the runs table).
            grouped = self.app.size.height < PROCESS_MIN_HEIGHT
            for gpu in res.gpus:
                self._add_gpu(grid, gpu, res.fake_gpus, bar_width)
                processes = ([] if grouped else self._reservation_lines(gpu)) + \
                    self._process_lines(gpu)
                if processes:  # free lines between two grids that line up
                    lines += [grid, *processes]
                    grid = _grid(bar_width)
            shared = self._grouped_reservation_lines(res.gpus) if grouped else []
            if shared:
                lines += [grid, *shared]
                grid = _grid(bar_width)
        else:
            hosts = {h.name: h for h in res.nodes}
            names = sorted(set(hosts) | {g.node or "" for g in res.gpus})
            for name in names:
                if name:
                    grid.add_row(*self._node_row(name, hosts.get(name), bar_width))
                for gpu in sorted((g for g in res.gpus if (g.node or "") == name),
                                  key=lambda g: g.index):
                    self._add_gpu(grid, gpu, res.fake_gpus, bar_width)
            if res.nodes_lost:  # one dim line each, between the nodes and this machine
                lines.append(grid)
                grid = _grid(bar_width)
                muted = theme_style(self.app, "foreground-muted")  # the theme's dim
                for lost in res.nodes_lost:
                    ago = duration(max(0.0, res.taken_at - lost.since))
                    lines.append(Text(f"{lost.name} — gone {ago} ago", style=muted,
                                      no_wrap=True, overflow="ellipsis"))
        grid.add_row(*self._cpu_row(res.host, bar_width))
        grid.add_row(*self._ram_row(res.host, bar_width))
        return Group(*lines, grid)

    def _add_gpu(self, grid: Table, gpu: Gpu, fake_gpus: bool, width: int) -> None:
        grid.add_row(*self._gpu_row(gpu, fake_gpus, width))
        if self.shows_history:
            for row in self._history_rows(gpu, width):
                grid.add_row(*row)

    def _by_run(self, gpu: Gpu) -> dict[str, int]:
        """This user's reservations on ``gpu`` by run (MiB), while a run holds several
        GPUs (replicas); empty otherwise (the process lines say whose memory it is)."""
        ledger = self.resources.ledger if self.resources else []
        gpus_of: dict[str, set[int | None]] = {}
        for entry in ledger:
            gpus_of.setdefault(entry.run_id, set()).add(entry.gpu)
        if not any(len(held) > 1 for held in gpus_of.values()):
            return {}
        by_run: dict[str, int] = {}
        for entry in ledger:
            if entry.gpu == gpu.index and not entry.other_user:
                by_run[entry.run_id] = by_run.get(entry.run_id, 0) + entry.vram_mb
        return by_run

    def _rsv_line(self, label: str, by_run: dict[str, int]) -> Text:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        line = Text(f"  rsv {label}".rstrip(), style=muted, no_wrap=True, overflow="ellipsis")
        for n, (run_id, mb) in enumerate(by_run.items()):
            line.append(" · " if n else " ", style=muted)
            line.append(run_id, style=theme_style(app, "primary"))
            line.append(f" {gib(mb, unit=False)}", style=theme_style(app, "secondary"))
        return line

    def _grouped_reservation_lines(self, gpus: list[Gpu]) -> list[Text]:
        """``  rsv GPU1-3 20260115_090500 8.0``: GPUs holding the same runs, one line."""
        groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
        for gpu in gpus:
            by_run = self._by_run(gpu)
            if by_run:
                groups.setdefault(tuple(by_run.items()), []).append(gpu.index)
        return [self._rsv_line(gpu_span(indices), dict(runs))
                for runs, indices in groups.items()]

    def _reservation_lines(self, gpu: Gpu) -> list[Text]:
        """``  rsv 20260115_090500 16.0 · 20260115_090512 8.0``: the GPU's reservations
        by run, when a run holds several GPUs (replicas): which runs share it."""
        by_run = self._by_run(gpu)
        return [self._rsv_line("", by_run)] if by_run else []

    def _process_lines(self, gpu: Gpu) -> list[Text]:
        """``  ↳ 4321 alice  4,096 MiB  run 20260115_090500``: who holds the memory."""
        holders = self.holders.get(gpu.index) or []
        if not holders:
            return []
        app = self.app
        muted = theme_style(app, "foreground-muted")
        room = PROCESS_LINES if self.app.size.height >= PROCESS_MIN_HEIGHT else 1
        shown = holders[:room]
        lines = []
        for holder in shown:
            line = Text(f"  ↳ {holder.pid:>7} ", style=muted, no_wrap=True,
                        overflow="ellipsis")
            line.append(f"{(holder.user or '?')[:10]:<10} ")
            line.append(f"{holder.used_mb:>7,} MiB  ", style=theme_style(app, "secondary"))
            ours = holder.run_id is not None or holder.nodeset is not None
            line.append(holder.what, style=theme_style(app, "primary") if ours else muted)
            lines.append(line)
        if len(holders) > len(shown):
            lines[-1].append(f"  +{len(holders) - len(shown)} more",
                             style=muted)
        return lines

    def _node_row(self, name: str, host: NodeHost | None,
                  width: int) -> tuple[Text, Text, Text]:
        """A node's heading: its name, and its host RAM and CPU when its probe said them."""
        app = self.app
        label = Text(name, style=theme_style(app, "primary", bold=True))
        if host is None:
            return label, Text(), Text()
        total = max(host.ram_total_mb, 1.0)
        used = host.ram_total_mb - host.ram_available_mb
        style = theme_style(app, level_variable(used / total))
        bar = stacked_bar(width, [(used, style)], total, theme_style(app, "panel"))
        info = Text(f"{gib(used, unit=False)} used", style=style)
        info.append(f" / {gib(host.ram_total_mb)} RAM")
        info.append(f" · {host.cpu_count} cores {host.cpu_percent:.0f}%",
                    style=theme_style(app, "foreground-muted"))
        return label, bar, info

    def _gpu_row(self, gpu: Gpu, fake_gpus: bool, width: int) -> tuple[Text, Text, Text]:
        app = self.app
        total = max(gpu.total_mb, 1.0)
        committed = (gpu.used_mb + gpu.reserved_mb) / total
        indent = "  " if gpu.node else ""  # under its node's heading
        label = Text(f"{indent}GPU{gpu.index} ", style=theme_style(app, "primary", bold=True))
        name = gpu.name.removeprefix(f"{gpu.node} · ") if gpu.node else gpu.name
        fake = fake_gpus and "fake" not in gpu.name.lower()
        label.append(name + (" (fake)" if fake else ""),
                     style=theme_style(app, "foreground-muted"))
        used_style = theme_style(app, level_variable(committed))
        bar = stacked_bar(width, [(gpu.used_mb, used_style),
                                  (gpu.reserved_mb, theme_style(app, "secondary"))],
                          total, theme_style(app, "panel"))
        util = "util —" if gpu.utilization_pct is None else f"util {gpu.utilization_pct:3.0f}%"
        info = Text(f"{gib(gpu.used_mb, unit=False)} used", style=used_style)
        info.append(f" · {gib(gpu.reserved_mb, unit=False)} rsv",
                    style=theme_style(app, "secondary"))
        others = sum(e.vram_mb for e in (self.resources.ledger if self.resources else ())
                     if e.other_user and e.gpu == gpu.index) \
            if not gpu.node else 0
        if others:  # the machine-wide ledger: held by another Unix user's scheduler
            info.append(f" ({gib(others, unit=False)} other users)",
                        style=theme_style(app, "secondary"))
        free = max(0, gpu.available_mb)  # what admission can still hand out
        info.append(f" · {gib(free, unit=False)} free / {gib(gpu.total_mb)} · {util}")
        return label, bar, info

    def _history_rows(self, gpu: Gpu, width: int) -> list[tuple[Text, Text, Text]]:
        """HISTORY_ROWS lines under a GPU's meter: used, and reserved stacked on it."""
        app = self.app
        samples = list(self.history.get(_key(gpu), ()))[-width:]
        muted = theme_style(app, "foreground-muted")
        used = theme_style(app, level_variable((gpu.used_mb + gpu.reserved_mb) /
                                               max(gpu.total_mb, 1.0)))
        plot = stacked_columns([(u, r) for _, u, r in samples], width, HISTORY_ROWS,
                               used, theme_style(app, "secondary"))
        span = samples[-1][0] - samples[0][0] if len(samples) > 1 else 0.0
        label = Text(f"  history {_span(span)}", style=muted)
        peak = max((u + r for _, u, r in samples), default=0.0)
        info = Text(f"peak {peak * gpu.total_mb / 1024:.1f} GiB used+rsv", style=muted)
        rows = [(label, plot[0], info)]
        rows += [(Text(), line, Text()) for line in plot[1:]]
        return rows

    def _cpu_row(self, host: Host, width: int) -> tuple[Text, Text, Text]:
        app = self.app
        fraction = host.cpu_percent / 100
        style = theme_style(app, level_variable(fraction, warn=0.8, high=0.95))
        label = Text("CPU ", style=theme_style(app, "primary", bold=True))
        label.append(f"{host.cpu_count} cores", style=theme_style(app, "foreground-muted"))
        bar = stacked_bar(width, [(fraction, style)], 1.0, theme_style(app, "panel"))
        return label, bar, Text(f"{host.cpu_percent:5.1f}%", style=style)

    def _ram_row(self, host: Host, width: int) -> tuple[Text, Text, Text]:
        app = self.app
        total = max(host.ram_total_mb, 1.0)
        used = host.ram_total_mb - host.ram_available_mb
        style = theme_style(app, level_variable((used + host.ram_reserved_mb) / total))
        label = Text("RAM", style=theme_style(app, "primary", bold=True))
        bar = stacked_bar(width, [(used, style),
                                  (host.ram_reserved_mb, theme_style(app, "secondary"))],
                          total, theme_style(app, "panel"))
        info = Text(f"{gib(used, unit=False)} used", style=style)
        if host.ram_reserved_mb:
            info.append(f" · {gib(host.ram_reserved_mb, unit=False)} rsv",
                        style=theme_style(app, "secondary"))
        info.append(f" / {gib(host.ram_total_mb)}")
        return label, bar, info


def _span(seconds: float) -> str:
    """``45s``, ``3m``: how far back the history reaches."""
    return f"{seconds:.0f}s" if seconds < 90 else f"{seconds / 60:.0f}m"


def _grid(bar_width: int) -> Table:
    """Label, bar and numbers: the same widths in every grid, so split ones line up."""
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(width=LABEL_WIDTH, no_wrap=True, overflow="ellipsis")
    grid.add_column(width=bar_width, no_wrap=True)
    grid.add_column(width=INFO_WIDTH, no_wrap=True, overflow="ellipsis")
    return grid


def _key(gpu: Gpu) -> int | tuple[str, int]:
    """A GPU's history key: its index, or (node, index) on a cluster (each has a GPU0)."""
    return gpu.index if gpu.node is None else (gpu.node, gpu.index)


def gpu_span(indices: list[int]) -> str:
    """``GPU1-3`` for consecutive indices, ``GPU0,2`` otherwise, ``GPU4`` for one."""
    if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
        return f"GPU{indices[0]}-{indices[-1]}"
    return "GPU" + ",".join(map(str, indices))
