"""``evaltui replay EP_DIR``: the episode replay viewer on an episode dir, anywhere.

An ``ep{NNNN}/`` dir is self-contained (episode.json, log.jsonl, assets/), so a dir
copied from a teammate's run replays without the run, the dataset or the graph.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaltui.commands.console import error
from evaltui.contract.records import EPISODE_FILENAME, LOG_FILENAME
from evaltui.runview.gif import NoFramesError, animation_format, export_gif


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay",
                       description="Open the replay viewer on an episode dir "
                       "(outputs/eval_runs/RUN_ID/episodes/epNNNN, or a copy of one).")
    p.add_argument("ep_dir", metavar="EP_DIR", help="an episode dir with log.jsonl")
    p.add_argument("--export", metavar="OUT.gif", default=None,
                   help="write the episode's frames as an animated GIF (or, for OUT.png, an "
                   "animated PNG) instead of opening the viewer")
    p.add_argument("--scale", type=int, default=None, metavar="N",
                   help="--export each frame N times its size (default: enough to make it "
                   "256 px or more, e.g. 4 for BabyAI's 64 px)")
    p.add_argument("--fps", type=float, default=4.0, help="frames per second of --export "
                   "(default 4)")
    # SUPPRESS: `evaltui --theme light replay EP` keeps the global option's value.
    p.add_argument("--theme", default=argparse.SUPPRESS, help="evaltui-dark (default), "
                   "evaltui-light, evaltui-high-contrast, or any Textual theme")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ep_dir = Path(args.ep_dir).expanduser()
    if not (ep_dir / LOG_FILENAME).is_file() and not (ep_dir / EPISODE_FILENAME).is_file():
        return error(f"{ep_dir} is not an episode dir (no log.jsonl or episode.json)")
    if args.export:
        return export(ep_dir, Path(args.export).expanduser(), args.fps, args.scale)
    # start-up: Textual (~1 s) loads once a screen opens: --help imports every command
    from evaltui.commands.tuiapp import open_app

    return open_app(getattr(args, "theme", None), replay_dir=ep_dir.resolve())


def export(ep_dir: Path, out: Path, fps: float, scale: int | None = None) -> int:
    """``--export``: the frames as a GIF (or APNG), no TUI; exit 2 when there are none or
    the output cannot be written (checked before any frame is read)."""
    if not fps > 0:
        return error(f"--fps must be > 0, got {fps}")
    if scale is not None and scale < 1:
        return error(f"--scale must be >= 1, got {scale}")
    try:
        animation_format(out)
        count = export_gif(ep_dir, out, fps, scale=scale)
    except (NoFramesError, OSError, ValueError) as exc:  # OSError: unwritable out, bad frame
        return error(str(exc))
    print(f"wrote {count} frames at {fps:g} fps to {out}")
    return 0
