"""``evaltui race A B``: two graphs on the same episodes, stopped when the difference is known.

Both graphs run as ordinary runs (two run dirs, started as ``evaltui eval`` starts one)
with the same ``eval.order_seed``, so they deal the same episodes in the same random
order. Their rows are followed as they land; each episode both have finished adds its
paired difference, in the order, to a betting confidence sequence of the mean difference
B - A (:class:`~evaltui.engine.stats.paired.PairedRace`). Once that interval excludes 0
(or, with ``--min-diff``, lies within it of 0) both runs are cancelled; the command prints
which is better, by how much with its interval, and the pairs used against a fixed-n
paired design of 80 % power for the difference seen (docs/statistics.md).
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from pathlib import Path
from typing import Any

from evaltui.graphs import builtin_graph_names

POLL_SEC = 0.25
SIDES = ("A", "B")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("race", help="two graphs on the same episodes, stopped when the "
                       "paired difference is decided (anytime-valid)",
                       description="Run graphs A and B on the same episodes in the same "
                       "random order and stop both as soon as the 95%% confidence sequence "
                       "of the mean difference B - A excludes 0. A and B are graph files, "
                       f"JobSpec files or built-in graphs ({', '.join(builtin_graph_names())}).")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument("--metric", default="success",
                   help="a metric bounded in [0, 1]: success (default), spl, ndtw, sdtw")
    p.add_argument("--dataset", help="'babyai', a .jsonl file or a dir of {split}.jsonl")
    p.add_argument("--split", help="dataset split (default: the dataset's)")
    p.add_argument("--episodes", type=int, help="episodes of the split (default: all)")
    p.add_argument("--workers", type=int, help="worker count K of each run")
    p.add_argument("--order-seed", type=int, metavar="SEED",
                   help="the order both deal (default: drawn, and printed)")
    p.add_argument("--min-diff", type=float, metavar="D",
                   help="also stop, undecided, once the interval lies within +-D of 0")
    p.add_argument("--outputs", help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from evaltui.commands.evalstart import discard, hand_over, start_run_process
    from evaltui.contract.spec import SpecError
    from evaltui.engine.episode.metrics import METRIC_RANGES
    from evaltui.engine.graph.specbuild import build_spec

    console = Console(stderr=True)
    if METRIC_RANGES.get(args.metric) != (0.0, 1.0):
        console.print(f"[bold red]error[/]: --metric {args.metric!r} is not a metric bounded "
                      "in [0, 1] (success, spl, ndtw, sdtw)", highlight=False, soft_wrap=True)
        return 2
    if args.min_diff is not None and not 0 < args.min_diff < 1:
        console.print("[bold red]error[/]: --min-diff must be in (0, 1)", highlight=False,
                      soft_wrap=True)
        return 2
    seed = args.order_seed if args.order_seed is not None else secrets.randbelow(2**31)
    try:
        specs = [build_spec(target, dataset=args.dataset, split=args.split,
                            episodes=args.episodes, workers=args.workers, order_seed=seed)
                 for target in (args.a, args.b)]
    except SpecError as exc:
        console.print(f"[bold red]error[/]: {exc}", highlight=False, soft_wrap=True)
        return 2
    early = [start_run_process() for _ in SIDES]
    answers: list[dict[str, Any]] = []
    for i, (proc, spec) in enumerate(zip(early, specs, strict=True)):
        answer = hand_over(proc, spec, args.outputs)
        if answer is None or "refused" in answer:
            for other in early[i + 1:]:
                discard(other)
            _stop([p.proc for p in early[:i]])
            why = (answer or {}).get("refused", "the run process ended before it answered")
            console.print(f"[bold red]error[/]: {SIDES[i]}: {why}", highlight=False,
                          soft_wrap=True)
            return 2
        answers.append(answer)
    dirs = [Path(a["run_dir"]) for a in answers]
    console.print(f"race on {answers[0]['dataset']}/{answers[0]['split']}, "
                  f"{answers[0]['episodes']} episodes, order seed {seed}: "
                  f"A = {answers[0]['graph_name']} ({dirs[0].name}), "
                  f"B = {answers[1]['graph_name']} ({dirs[1].name})", highlight=False)
    try:
        race = _follow(dirs, [p.proc for p in early], args)
    finally:
        _stop([p.proc for p in early])
    return _report(race, answers, dirs, args, seed)


def _follow(dirs: list[Path], procs: list[Any], args: argparse.Namespace) -> Any:
    """Feed both runs' rows to the race until it is decided or both runs ended."""
    from evaltui.engine.episode.metrics import row_values
    from evaltui.engine.stats.paired import PairedRace
    from evaltui.results.verifystop import dealt_order
    from evaltui.rundir.jsonfiles import read_json

    order = dealt_order(read_json(dirs[0] / "spec.json"))
    race = PairedRace(order, min_diff=args.min_diff)
    seen: list[dict[Path, float]] = [{}, {}]
    while True:
        ended = all(p.poll() is not None for p in procs)
        for side, run_dir, mtimes in zip(SIDES, dirs, seen, strict=True):
            for path in run_dir.glob("episodes/ep*/episode.json"):
                try:
                    mtime = path.stat().st_mtime_ns
                    if mtimes.get(path) == mtime:
                        continue
                    row = read_json(path)
                except (OSError, ValueError):
                    continue  # being replaced: read at the next look
                mtimes[path] = mtime
                value = row_values(row).get(args.metric)
                if value is not None:
                    race.add(side, int(row["episode_index"]), value)
        if race.winner is not None or ended:
            return race
        time.sleep(POLL_SEC)


def _stop(procs: list[Any]) -> None:
    from evaltui.procs.groups import terminate_group
    from evaltui.procs.spawn import spawned_ref

    for proc in procs:
        if proc.poll() is None:
            terminate_group(spawned_ref(proc))
        proc.wait()


def _report(race: Any, answers: list[dict[str, Any]], dirs: list[Path],
            args: argparse.Namespace, seed: int) -> int:
    state = race.state()
    lo, hi = state.interval
    names = {"A": answers[0]["graph_name"], "B": answers[1]["graph_name"]}
    result = {"metric": args.metric, "winner": state.winner, "n": state.n,
              "decided_at": race.decided_at, "full_n": answers[0]["episodes"],
              "diff_b_minus_a": state.diff, "interval": [lo, hi],
              "method": "betting confidence sequence of the mean paired difference B - A, "
                        "95%", "fixed_n_80_power": state.fixed_n, "order_seed": seed,
              "runs": {"A": str(dirs[0]), "B": str(dirs[1])}}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    diff = f"{state.diff:+.3f}" if state.diff is not None else "-"
    if state.winner in SIDES:
        better = state.winner
        verdict = (f"{better} ({names[better]}) is better on {args.metric}: B - A = {diff}, "
                   f"95% CS [{lo:+.3f}, {hi:+.3f}]")
    elif state.winner == "neither":
        verdict = f"no difference beyond {args.min_diff}: B - A = {diff}, 95% CS " \
                  f"[{lo:+.3f}, {hi:+.3f}]"
    else:
        verdict = f"undecided after the split: B - A = {diff}, 95% CS [{lo:+.3f}, {hi:+.3f}]"
    print(verdict)
    fixed = (f"; a fixed-n paired design of 80% power for this difference needs "
             f"{state.fixed_n}" if state.fixed_n else "")
    print(f"episodes used: {state.n} pairs of {answers[0]['episodes']}{fixed} "
          "(CS: confidence sequence, valid at the stop)")
    return 0
