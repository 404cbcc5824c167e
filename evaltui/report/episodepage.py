"""One episode's report page: its row, metrics, frames (a sheet image + a step slider) and
its firing log (paged by the site's script).

Each page has its own data file (``epNNNN.js``: frame geometry and the log's records)
and frames sheet (``epNNNN.frames.png``, every frame in one image, one tile per frame),
so opening the run's index loads no episode's frames and an episode page loads only its
own. The frames and log are read with the replay viewer's readers
(:func:`evaltui.runview.gif.episode_frames`, :func:`evaltui.rundir.logread.iter_log`), opened
without following a symlink out of the run dir.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from PIL import Image

from evaltui.contract.records import EPISODES_DIRNAME, LOG_FILENAME
from evaltui.engine.episode.videowriter import VIDEO_FILENAME
from evaltui.report.html import definition_list, esc, js_data, number, page, value_attr, when
from evaltui.rundir.logread import iter_log
from evaltui.rundir.safeopen import LeavesRoot, open_inside, read_bytes_inside
from evaltui.runview.frames import FrameRef
from evaltui.runview.gif import NoFramesError, episode_frames

MAX_FRAMES = 600
"""More frames than this are thinned evenly (first and last kept), and the page says so."""
LOG_RECORDS_LIMIT = 20_000
"""Records of the firing log carried into the page; the page says when there were more."""
DETAIL_CHARS = 160
ERROR_CHARS = 4000
DISPLAY_WIDTH = 384
"""Frames are shown about this wide (small ones scaled up by a whole factor)."""


@dataclass(frozen=True)
class FramesSheet:
    """What the page's script needs to show frame ``i`` of the sheet."""

    count: int
    total: int
    """Frames the episode logged (``count`` is fewer when they were thinned)."""
    width: int
    height: int
    cols: int
    steps: list[int]
    scale: float


def _badge(element_id: str, state: str) -> str:
    return f'<span id="{element_id}" class="state state-{esc(state)}">{esc(state)}</span>'


def ep_name(index: int) -> str:
    return f"ep{index:04d}"


def write_frames_sheet(frames: list[FrameRef], out: Path) -> FramesSheet:
    """Every frame as one tile of a near-square grid, in one PNG at ``out``."""
    total = len(frames)
    if total > MAX_FRAMES:
        picks = sorted({round(i * (total - 1) / (MAX_FRAMES - 1)) for i in range(MAX_FRAMES)})
        frames = [frames[i] for i in picks]
    images = [ref.image() for ref in frames]
    w, h = images[0].size
    cols = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / cols)
    sheet = Image.new("RGB", (cols * w, rows * h))
    for i, im in enumerate(images):
        if im.size != (w, h):
            im = im.resize((w, h), Image.Resampling.NEAREST)
        sheet.paste(im, ((i % cols) * w, (i // cols) * h))
    sheet.save(out, format="PNG", optimize=False, compress_level=6)
    scale = float(max(1, DISPLAY_WIDTH // w)) if w <= DISPLAY_WIDTH else DISPLAY_WIDTH / w
    return FramesSheet(len(images), total, w, h, cols, [ref.step for ref in frames], scale)


def read_log(run_dir: Path, index: int) -> tuple[list[list[Any]], int, str | None]:
    """The log's records (condensed, at most LOG_RECORDS_LIMIT), how many it has, and why
    it could not be read (None if it could)."""
    rel = f"{EPISODES_DIRNAME}/{ep_name(index)}/{LOG_FILENAME}"
    try:
        fh = open_inside(run_dir, rel)
    except LeavesRoot:
        return [], 0, f"{LOG_FILENAME} is a symlink out of the run dir; not read"
    except OSError:
        return [], 0, f"no {LOG_FILENAME}"
    records: list[list[Any]] = []
    total = 0
    with fh:
        for line, (_offset, rec) in enumerate(iter_log(fh)):
            total += 1
            if len(records) < LOG_RECORDS_LIMIT:
                records.append(_condense(line, rec))
    return records, total, None


def _condense(line: int, rec: dict[str, Any]) -> list[Any]:
    event = rec.get("event", "?")
    if event == "corrupt":
        detail = rec.get("raw")
    elif rec.get("outputs") is not None:
        detail = orjson.dumps(rec["outputs"], default=str).decode()
    else:
        detail = orjson.dumps(rec.get("inputs"), default=str).decode() \
            if rec.get("inputs") is not None else None
    if isinstance(detail, str) and len(detail) > DETAIL_CHARS:
        detail = detail[:DETAIL_CHARS - 1] + "…"
    error = rec.get("error")
    error = str(error)[-ERROR_CHARS:] if error else None
    dur = rec.get("dur_ms")
    return [line, rec.get("step"), event, rec.get("node"), rec.get("nodeset"),
            round(dur, 3) if isinstance(dur, int | float) else None, detail, error]


def _frames(snap_dir: Path, index: int, dest: Path) -> tuple[FramesSheet | None, str | None]:
    ep_dir = snap_dir / EPISODES_DIRNAME / ep_name(index)
    try:
        frames = episode_frames(ep_dir)
    except NoFramesError as exc:
        return None, str(exc)
    if not frames:
        return None, "the log references no frame that is in the episode dir"
    try:
        return write_frames_sheet(frames, dest / f"{ep_name(index)}.frames.png"), None
    except (OSError, ValueError) as exc:
        return None, f"frames unreadable: {exc}"


def _video_html(run_dir: Path, index: int, dest: Path) -> str:
    """The episode's ``assets/video.mp4`` (H.264, which browsers play) copied beside its
    page as ``epNNNN.mp4`` and a player for it; "" without one (or one leaving the dir)."""
    rel = f"{EPISODES_DIRNAME}/{ep_name(index)}/{VIDEO_FILENAME}"
    try:
        data = read_bytes_inside(run_dir, rel)
    except (OSError, ValueError):
        return ""
    (dest / f"{ep_name(index)}.mp4").write_bytes(data)
    return (f'<video id="episode-video" controls muted playsinline preload="metadata" '
            f'src="{ep_name(index)}.mp4"></video>')


def write_episode_page(run_dir: Path, row: dict[str, Any], dest: Path, *, run_id: str,
                       neighbours: tuple[int | None, int | None], root: str = "../") -> None:
    """``dest/epNNNN.html`` (+ ``.js``, ``.frames.png``) of the episode ``row``."""
    index = int(row["episode_index"])
    name = ep_name(index)
    sheet, no_frames = _frames(run_dir, index, dest)
    records, total, log_problem = read_log(run_dir, index)
    data = {"index": index, "frames": None if sheet is None else {
        "sheet": f"{name}.frames.png", **dataclasses.asdict(sheet)},
        "log": {"columns": ["line", "step", "event", "node", "nodeset", "dur_ms", "detail",
                            "error"], "records": records, "total": total}}
    (dest / f"{name}.js").write_bytes(js_data("EVALTUI_EPISODE", data))
    status = str(row.get("status"))
    items = [("episode id", row.get("episode_id")), ("scene", row.get("scene_id")),
             ("status", status), ("steps", row.get("step_count")),
             ("elapsed", None if row.get("elapsed_sec") is None
              else f"{number(row.get('elapsed_sec'), 3)} s"),
             ("worker", row.get("worker_id")), ("attempts", row.get("attempts")),
             ("node", row.get("node")), ("finished", when(row.get("finished_at")))]
    error = row.get("error")
    last_line = str(error).strip().splitlines()[-1] if error and str(error).strip() else ""
    error_html = (f'<section id="episode-error"><h2>Error</h2><p class="note">this episode '
                  f"counts as a failure in the run's means</p><details><summary>"
                  f"{esc(last_line)}</summary><pre>{esc(error)}</pre></details>"
                  "</section>") if error else ""
    metrics = row.get("metrics") or {}
    metric_rows = "".join(
        f'<tr data-metric="{esc(k)}"><th scope="row">{esc(k)}</th>'
        f'<td class="value" data-value="{value_attr(v)}">{number(v)}</td></tr>'
        for k, v in metrics.items())
    metrics_html = (f'<table id="episode-metrics" class="metrics">{metric_rows}</table>'
                    if metric_rows else '<p class="empty">no metrics</p>')
    if sheet is None:
        frames_html = f'<p id="no-frames" class="empty">no frames ({esc(no_frames)})</p>'
    else:
        thinned = (f'<p class="note">{sheet.count} of {sheet.total} frames shown (evenly '
                   "thinned)</p>") if sheet.count < sheet.total else ""
        frames_html = f"""{thinned}<div class="viewer">
<div id="frame" class="frame" role="img" aria-label="frame"></div>
<div class="viewer-controls">
<button id="play" type="button">Play</button>
<input id="step-slider" type="range" min="0" max="{sheet.count - 1}" value="0"
 aria-label="frame">
<span id="frame-label"></span>
</div></div>"""
    frames_html += _video_html(run_dir, index, dest)
    log_note = f'<p class="empty">{esc(log_problem)}</p>' if log_problem else ""
    if total > len(records):
        log_note += (f'<p class="note">first {len(records)} of {total} records shown; the '
                     f"whole log is {EPISODES_DIRNAME}/{name}/{LOG_FILENAME} in the run dir</p>")
    prev_i, next_i = neighbours
    nav = " ".join(link for link in (
        f'<a href="{ep_name(prev_i)}.html" id="prev-episode">previous</a>'
        if prev_i is not None else "",
        '<a href="../index.html" id="run-link">run ' + esc(run_id) + "</a>",
        f'<a href="{ep_name(next_i)}.html" id="next-episode">next</a>'
        if next_i is not None else "") if link)
    title = f"Episode {index}"
    body = f"""<header class="episode">
<nav class="crumbs">{nav}</nav>
<h1>{esc(title)} {_badge("episode-status", status)}</h1>
<p class="instruction">{esc(row.get("instruction") or "")}</p>
{definition_list(items, "run-header")}
</header>
<main>
{error_html}
<div class="side-by-side">
<section id="frames"><h2>Frames</h2>{frames_html}</section>
<section><h2>Metrics</h2>{metrics_html}</section>
</div>
<section id="log"><h2>Firing log</h2>{log_note}
<table id="log-table" class="log"><thead></thead><tbody></tbody></table>
<nav id="log-pager" class="pager"></nav>
</section>
</main>"""
    (dest / f"{name}.html").write_text(
        page(f"evaltui report: run {run_id}, episode {index}", body, root=root,
             data_scripts=[f"{name}.js"]))
