"""The report's running-means plot is legible (issue 35, item 13): success and SPL were
hidden under SDTW, and four overlapping CI bands dominated the lines."""

from __future__ import annotations

import re

import numpy as np

from evaltui.report.svgplots import BAND_OPACITY, running_means_svg
from evaltui.runview.running_mean import Series


def series(values: list[float]) -> Series:
    counts = np.arange(1, len(values) + 1, dtype=float)
    mean = np.asarray(values, dtype=float)
    return Series(counts, mean, np.clip(mean - 0.2, 0, 1), np.clip(mean + 0.2, 0, 1))


def test_lines_over_faint_bands_success_on_top_each_its_own_dash() -> None:
    same = [0.5, 0.6, 0.55, 0.6, 0.62]  # SPL, nDTW and SDTW on one line: a bot's run
    svg = running_means_svg({"success": series([0.6, 0.7, 0.66, 0.7, 0.72]),
                             "spl": series(same), "ndtw": series(same),
                             "sdtw": series(same)})
    bands = [m.start() for m in re.finditer(r'<polygon class="band"', svg)]
    lines = re.findall(r'<polyline class="mean" data-metric="(\w+)"[^>]*'
                       r'stroke-dasharray="([^"]+)"', svg)
    assert len(bands) == 4 and len(lines) == 4
    assert max(bands) < svg.index('<polyline class="mean"')  # every band under every line
    assert all(float(o) <= 0.1 for o in re.findall(r'fill-opacity="([\d.]+)"', svg))
    assert BAND_OPACITY <= 0.1
    assert lines[-1][0] == "success"  # drawn last: on top
    assert len({dash for _, dash in lines}) == 4  # SPL under SDTW still shows
