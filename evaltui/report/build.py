"""``evaltui report``: a run's static site, built from its run dir alone.

Layout of a run's report (everything relative, nothing fetched; opens from ``file://``)::

    index.html              header, notes, metrics, plots, the episode table
    data/episodes.js        the table's rows (one compact file)
    plots/*.svg             running means with CI bands, steps histogram
    episodes/epNNNN.html    one page per chosen episode, with its .js and .frames.png
    assets/report.{js,css}  the one script and stylesheet, copied from the package
    .evaltui-report         marks the directory as a report (see report.outdir)

:func:`build_run_site` writes one run's pages into a directory whose site root is
``root`` levels up; a set's report puts each member's run site
under ``runs/<run_id>/`` of its own site with the same function and links them from a
set page, so the only set-specific code is that page.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from evaltui.report.episodechoice import EpisodeChoice
from evaltui.report.episodepage import write_episode_page
from evaltui.report.html import ASSETS_DIR, CSS_NAME, JS_NAME
from evaltui.report.outdir import publish
from evaltui.report.runpage import write_run_page
from evaltui.runview.snapshot import RunSnapshot

EPISODE_PAGES_DIR = "episodes"


@dataclass(frozen=True)
class RunSite:
    """What :func:`build_run_site` wrote."""

    pages: list[int]
    """Episodes that got a page."""


def copy_assets(site_root: Path) -> None:
    """The site's one script and one stylesheet, from the package."""
    target = site_root / ASSETS_DIR
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("evaltui.report") / "assets"
    for name in (CSS_NAME, JS_NAME):
        (target / name).write_bytes((source / name).read_bytes())


def build_run_site(snap: RunSnapshot, dest: Path, choice: EpisodeChoice, *,
                   depth: int = 0) -> RunSite:
    """One run's index and episode pages under ``dest``, which is ``depth`` directories
    below the site root (where ``assets/`` is)."""
    root = "../" * depth
    pages = choice.pick(snap.rows)
    chosen = set(pages)
    ep_dir = dest / EPISODE_PAGES_DIR
    ep_dir.mkdir(parents=True, exist_ok=True)
    rows = [r for r in snap.rows if r.get("episode_index") in chosen]
    for k, row in enumerate(rows):
        prev_i = rows[k - 1]["episode_index"] if k else None
        next_i = rows[k + 1]["episode_index"] if k + 1 < len(rows) else None
        write_episode_page(snap.run_dir, row, ep_dir, run_id=snap.run_id,
                           neighbours=(prev_i, next_i), root=root + "../")
    write_run_page(snap, dest, pages, root=root)
    return RunSite(pages)


def write_run_report(snap: RunSnapshot, out: Path, choice: EpisodeChoice, *,
                     force: bool = False) -> RunSite:
    """The report of one run at ``out`` (refused, replaced or made: report.outdir)."""
    site: list[RunSite] = []

    def build(tmp: Path) -> None:
        copy_assets(tmp)
        site.append(build_run_site(snap, tmp, choice))

    publish(out, build, kind="run", force=force, sources=[snap.run_dir],
            of=f"run {snap.run_id}")
    return site[0]

