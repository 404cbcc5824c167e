"""A set's plot of each metric over checkpoint steps, as standalone SVG text.

One line per group of the set's other axes (a split, say), a point per checkpoint with
its 95% CI as a bar; the y axis is 0..1 for the rate metrics and 0..the highest bound
for the others. Same hand-written frame as the run's plots (:mod:`.svgplots`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from evaltui.report.svgplots import (
    _BOTTOM,
    _LEFT,
    _RIGHT,
    _TOP,
    COLOURS,
    HEIGHT,
    WIDTH,
    _axes,
    _frame,
    _ticks,
)

StepPoint = tuple[float, float, tuple[float, float] | None]
"""(step, mean, 95% CI or None)."""


def metric_over_steps_svg(metric: str, lines: Mapping[str, Sequence[StepPoint]]) -> str:
    """``metric``'s mean at each checkpoint step, a line per group (label -> points)."""
    parts = _frame(f"{metric} over checkpoint steps", "step", metric)
    points = [p for pts in lines.values() for p in pts]
    if not points:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" '
                     'fill="#555">no finished checkpoint yet</text></svg>')
        return "\n".join(parts)
    x_max = max(p[0] for p in points) or 1.0
    tops = [p[1] for p in points] + [p[2][1] for p in points if p[2]]
    y_ticks = [0, 0.25, 0.5, 0.75, 1.0] if max(tops) <= 1.0 else _ticks(max(tops))
    y_max = y_ticks[-1] or 1.0
    x_ticks = sorted({p[0] for p in points})
    parts += _axes(x_ticks if len(x_ticks) <= 12 else _ticks(x_max), x_max, y_ticks, y_max)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def xy(step: float, value: float) -> tuple[float, float]:
        return _LEFT + plot_w * step / x_max, _TOP + plot_h * (1 - value / y_max)

    for k, (label, pts) in enumerate(lines.items()):
        colour = COLOURS[k % len(COLOURS)]
        pts = sorted(pts)
        coords = [xy(s, m) for s, m, _ in pts]
        parts.append(f'<polyline class="curve" data-group="{escape(label)}" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
                     + f'" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        for (step, mean, ci), (x, y) in zip(pts, coords, strict=True):
            if ci is not None:
                _, y_lo = xy(step, ci[0])
                _, y_hi = xy(step, ci[1])
                parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_lo:.1f}" y2="{y_hi:.1f}" '
                             f'stroke="{colour}" stroke-opacity="0.5" stroke-width="3"/>')
            parts.append(f'<circle class="point" data-step="{step:g}" data-value="{mean!r}" '
                         f'cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"><title>'
                         f"{escape(label)} step {step:g}: {mean:.4f}</title></circle>")
        ly = _TOP + 14 + 16 * k
        parts.append(f'<line x1="{WIDTH - _RIGHT + 10}" x2="{WIDTH - _RIGHT + 26}" '
                     f'y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" stroke-width="3"/>')
        parts.append(f'<text x="{WIDTH - _RIGHT + 30}" y="{ly}" fill="#333">'
                     f"{escape(label)}</text>")
    parts.append("</svg>")
    return "\n".join(parts)
