"""The report's plots as standalone SVG text: running means with CI bands, a steps histogram.

Hand-written SVG (no plotting library): a few paths and text elements, small enough to
inline in the page and to drop into a paper as a file. Colours are fixed here rather
than taken from CSS so the files look the same outside the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

import numpy as np

from evaltui.runview.running_mean import Series

WIDTH, HEIGHT = 640, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 112, 16, 36
_PLOT_W, _PLOT_H = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
COLOURS = ("#2b6cb0", "#c05621", "#2f855a", "#805ad5", "#b83280", "#718096")
DASHES = ("none", "7 3", "2 3", "9 3 2 3", "4 4", "1 2")
"""A metric's line pattern, by its place (the first, success, solid)."""
BAND_OPACITY = 0.07


def _ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``high``."""
    if high <= 0:
        return [0.0]
    raw = high / count
    step = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if raw <= mult * step:
            step *= mult
            break
    return [i * step for i in range(int(math.ceil(high / step + 1e-9)) + 1)]


def _num(x: float) -> str:
    return f"{x:g}"


def _frame(title: str, x_label: str, y_label: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
            'font-family="sans-serif" font-size="11">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
            f'<text x="{_LEFT + _PLOT_W / 2}" y="{HEIGHT - 4}" '
            f'text-anchor="middle" fill="#333">{escape(x_label)}</text>',
            f'<text transform="translate(12 {_TOP + _PLOT_H / 2}) '
            f'rotate(-90)" text-anchor="middle" fill="#333">{escape(y_label)}</text>']


def _axes(xs: Sequence[float], x_max: float, ys: Sequence[float], y_max: float) -> list[str]:
    out = []
    for y in ys:
        py = _TOP + _PLOT_H * (1 - y / y_max)
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + _PLOT_W}" y1="{py:.1f}" y2="{py:.1f}" '
                   'stroke="#e2e8f0"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{py + 4:.1f}" text-anchor="end" '
                   f'fill="#555">{_num(y)}</text>')
    for x in xs:
        px = _LEFT + _PLOT_W * (x / x_max if x_max else 0)
        out.append(f'<text x="{px:.1f}" y="{_TOP + _PLOT_H + 14}" text-anchor="middle" '
                   f'fill="#555">{_num(x)}</text>')
    out.append(f'<rect x="{_LEFT}" y="{_TOP}" width="{_PLOT_W}" height="{_PLOT_H}" '
               'fill="none" stroke="#a0aec0"/>')
    return out


def running_means_svg(series: Mapping[str, Series]) -> str:
    """Each metric's running mean (line) and 95% CI (band) over episodes finished."""
    parts = _frame("running means with 95% CI", "episodes finished", "mean")
    n_max = max((int(s.counts[-1]) for s in series.values() if len(s)), default=0)
    if n_max == 0:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" '
                     'fill="#555">no scored episodes</text></svg>')
        return "\n".join(parts)
    x_max = float(max(n_max, 1))
    parts += _axes([t for t in _ticks(x_max) if t <= x_max], x_max,
                   [0, 0.25, 0.5, 0.75, 1.0], 1.0)

    def xy(count: float, value: float) -> str:
        return f"{_LEFT + _PLOT_W * count / x_max:.1f},{_TOP + _PLOT_H * (1 - value):.1f}"

    named = list(series.items())
    # All bands first and faint (four overlapping bands hid the lines); then the lines,
    # the first metric (success) last so it is on top, each with its own dash: SPL, nDTW
    # and SDTW often coincide, and a line under another must still be seen.
    for k, (name, s) in enumerate(named):
        ok = ~np.isnan(s.low)
        if ok.sum() >= 2:
            upper = [xy(c, v) for c, v in zip(s.counts[ok], s.high[ok], strict=True)]
            lower = [xy(c, v) for c, v in zip(s.counts[ok], s.low[ok], strict=True)]
            parts.append(f'<polygon class="band" data-metric="{escape(name)}" '
                         f'points="{" ".join(upper + lower[::-1])}" '
                         f'fill="{COLOURS[k % len(COLOURS)]}" fill-opacity="{BAND_OPACITY}" '
                         'stroke="none"/>')
    for k, (name, s) in reversed(list(enumerate(named))):
        colour, dash = COLOURS[k % len(COLOURS)], DASHES[k % len(DASHES)]
        line = " ".join(xy(c, v) for c, v in zip(s.counts, s.mean, strict=True))
        if len(s) == 1:
            parts.append(f'<circle cx="{line.split(",")[0]}" cy="{line.split(",")[1]}" '
                         f'r="3" fill="{colour}"/>')
        parts.append(f'<polyline class="mean" data-metric="{escape(name)}" points="{line}" '
                     f'fill="none" stroke="{colour}" stroke-width="{2.4 if k == 0 else 1.8}" '
                     f'stroke-dasharray="{dash}">'
                     f"<title>{escape(name)}: {float(s.mean[-1]):.4f} after "
                     f"{int(s.counts[-1])} episodes</title></polyline>")
    for k, (name, s) in enumerate(named):
        colour, dash = COLOURS[k % len(COLOURS)], DASHES[k % len(DASHES)]
        ly = _TOP + 14 + 16 * k
        parts.append(f'<line x1="{WIDTH - _RIGHT + 10}" x2="{WIDTH - _RIGHT + 26}" '
                     f'y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" stroke-width="3" '
                     f'stroke-dasharray="{dash}"/>')
        parts.append(f'<text x="{WIDTH - _RIGHT + 30}" y="{ly}" fill="#333">'
                     f"{escape(name)} {float(s.mean[-1]):.3f}</text>")
    parts.append("</svg>")
    return "\n".join(parts)


def steps_histogram_svg(steps: Sequence[int], max_bins: int = 30) -> str:
    """How many episodes took how many steps."""
    parts = _frame("steps per episode", "steps", "episodes")
    if not steps:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" '
                     'fill="#555">no scored episodes</text></svg>')
        return "\n".join(parts)
    low, high = min(steps), max(steps)
    width = max(1, math.ceil((high - low + 1) / max_bins))
    edges = list(range(low, high + width + 1, width))
    counts, _ = np.histogram(steps, bins=edges)
    y_ticks = _ticks(float(counts.max()), 4)
    y_max = y_ticks[-1]
    x_span = float(edges[-1] - edges[0])
    parts += _axes([], 1, y_ticks, y_max)
    bar_w = _PLOT_W * width / x_span
    for i, count in enumerate(counts.tolist()):
        x = _LEFT + _PLOT_W * (edges[i] - edges[0]) / x_span
        h = _PLOT_H * count / y_max
        label = f"{edges[i]}" if width == 1 else f"{edges[i]}-{edges[i + 1] - 1}"
        parts.append(f'<rect class="bar" x="{x + 1:.1f}" y="{_TOP + _PLOT_H - h:.1f}" '
                     f'width="{max(bar_w - 2, 1):.1f}" height="{h:.1f}" fill="{COLOURS[0]}">'
                     f"<title>{label} steps: {count} episodes</title></rect>")
    every = max(1, math.ceil(len(counts) / 12))
    for i in range(0, len(counts), every):
        x = _LEFT + _PLOT_W * (edges[i] - edges[0] + width / 2) / x_span
        parts.append(f'<text x="{x:.1f}" y="{_TOP + _PLOT_H + 14}" text-anchor="middle" '
                     f'fill="#555">{edges[i]}</text>')
    parts.append(f'<text x="{WIDTH - _RIGHT + 10}" y="{_TOP + 14}" fill="#333">'
                 f"n = {len(steps)}</text>")
    parts.append("</svg>")
    return "\n".join(parts)
