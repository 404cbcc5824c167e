"""``evaltui race A B``: two graphs on the same episodes, stopped when the difference is known.

Both graphs run as ordinary runs (two run dirs, started as ``evaltui eval`` starts one)
with the same ``eval.order_seed``, so they deal the same episodes in the same random
order. Their rows are followed as they land; each episode both have finished adds its
paired difference, in the order, to a betting confidence sequence of the mean difference
B - A (:class:`~evaltui.engine.stats.paired.PairedRace`). Once that interval excludes 0
(or, with ``--min-diff``, lies within it of 0) both runs are cancelled; the command prints
which is better, by how much with its interval, and the pairs used against a fixed-n
paired design of 80 % power for the difference seen (docs/statistics.md).

On success (binary) the race is decided by STEP (Snyder et al., RSS 2025;
:mod:`evaltui.engine.stats.step`) at 5 %, 2.5 % each way, over at most as many pairs as
the split has (500 at most); the CS still gives the interval. ``--decide-by cs`` keeps
the CS; without the ``step`` extra a success race falls back to it and says so.

``--set SET MEMBER`` races a set's member (named by axis values) against the set's
baseline (:mod:`evaltui.sets.racepair`): A is the baseline, B the member.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from evaltui.commands.console import error, note
from evaltui.commands.evalstart import discard, hand_over, start_run_process
from evaltui.commands.set_show import axis_entry
from evaltui.contract.setspec import SetFileError
from evaltui.contract.spec import SpecError
from evaltui.engine.episode.metrics import METRIC_RANGES, row_values
from evaltui.engine.graph.specbuild import build_spec
from evaltui.engine.stats.paired import PairedRace
from evaltui.engine.stats.step import StepDecider
from evaltui.engine.stats.steppolicy import StepUnavailable, load_policy
from evaltui.graphs import builtin_graph_names
from evaltui.procs.groups import terminate_group
from evaltui.procs.spawn import spawned_ref
from evaltui.results.verifystop import dealt_order
from evaltui.rundir.jsonfiles import read_json
from evaltui.sets.expansion import show_axes
from evaltui.sets.plan import plan_file, plan_record
from evaltui.sets.racepair import race_pair, race_spec
from evaltui.sets.setdir import read_set, resolve_set

POLL_SEC = 0.25
SIDES = ("A", "B")
STEP_ALPHA = 0.025
"""STEP's level each way: a call either way between equal policies is at most 5 %."""
STEP_MAX_PAIRS = 500
"""The longest STEP policy a race synthesizes (minutes of LPs beyond it)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("race",
                       description="Run graphs A and B on the same episodes in the same "
                       "random order and stop both as soon as the 95%% confidence sequence "
                       "of the mean difference B - A excludes 0. A and B are graph files, "
                       f"JobSpec files or built-in graphs ({', '.join(builtin_graph_names())}). "
                       "With --set, the one argument is a member of the set (AXIS=VALUE,...), "
                       "raced as B against the set's baseline as A.")
    p.add_argument("a", metavar="A", help="graph A, or with --set the member")
    p.add_argument("b", metavar="B", nargs="?", help="graph B (not with --set)")
    p.add_argument("--set", dest="set_ref", metavar="SET",
                   help="a set file, or a set's id or dir: race its MEMBER against its baseline")
    p.add_argument("--baseline", metavar="AXIS=VALUE,...",
                   help="with --set: this member as A instead of the set file's baseline")
    p.add_argument("--decide-by", choices=("step", "cs"),
                   help="step: STEP on the success pairs (the default for success; needs the "
                   "step extra); cs: the betting CS of the difference (the default otherwise)")
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
    console = Console(stderr=True)
    if METRIC_RANGES.get(args.metric) != (0.0, 1.0):
        return error(f"--metric {args.metric!r} is not a metric bounded in [0, 1] (success, "
                     "spl, ndtw, sdtw)")
    if args.min_diff is not None and not 0 < args.min_diff < 1:
        return error("--min-diff must be in (0, 1)")
    if args.decide_by == "step" and args.metric != "success":
        return error(f"--decide-by step needs a binary metric (success), not {args.metric}")
    seed = args.order_seed if args.order_seed is not None else secrets.randbelow(2**31)
    try:
        if args.set_ref is not None:
            specs, labels = _set_specs(args, seed)
        elif args.b is None:
            raise SpecError("B", "give two graphs A B, or --set SET MEMBER")
        else:
            specs = [build_spec(target, dataset=args.dataset, split=args.split,
                                episodes=args.episodes, workers=args.workers, order_seed=seed)
                     for target in (args.a, args.b)]
            labels = None
    except (SpecError, ValueError) as exc:  # SetFileError and SetDirError are ValueErrors
        return error(str(exc))
    # STEP's policy before the runs start: a synthesis takes seconds, and the runs would
    # go on meanwhile. Its n_max is the pairs the split can give (the run's own count
    # decides where the dataset cannot be read here: the run words that refusal).
    full_n = _split_size(specs[0])
    step = _step_decider(args, full_n, seed)
    if step is False:
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
            return error(f"{SIDES[i]}: {why}")
        answers.append(answer)
    dirs = [Path(a["run_dir"]) for a in answers]
    names = labels or [a["graph_name"] for a in answers]
    console.print(f"race on {answers[0]['dataset']}/{answers[0]['split']}, "
                  f"{answers[0]['episodes']} episodes, order seed {seed}: "
                  f"A = {names[0]} ({dirs[0].name}), "
                  f"B = {names[1]} ({dirs[1].name})", highlight=False)
    try:
        if full_n is None:
            step = _step_decider(args, int(answers[0]["episodes"]), seed)
        if step is False:
            return 2
        race = _follow(dirs, [p.proc for p in early], args, step)
    finally:
        _stop([p.proc for p in early])
    return _report(race, answers, dirs, args, seed, names)


def _set_specs(args: argparse.Namespace, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The baseline's and the member's race specs, and their labels (raises ValueError)."""
    if args.b is not None:
        raise SetFileError("MEMBER", f"with --set give one member, not {args.a!r} and {args.b!r}")
    if args.dataset or args.split:
        raise SetFileError("--set", "the set's members name their dataset and split; "
                           "leave out --dataset and --split")
    ref = Path(args.set_ref)
    plan = (plan_file(ref, args.outputs, check=False) if ref.is_file() else
            plan_record(read_set(resolve_set(args.set_ref, args.outputs)), args.outputs))
    base, member = race_pair(plan.expansion, axis_entry(args.a, "MEMBER"),
                             axis_entry(args.baseline, "--baseline") if args.baseline else None)
    specs = [race_spec(m, order_seed=seed, episodes=args.episodes, workers=args.workers)
             for m in (base, member)]
    return specs, [f"{plan.set_id} baseline {show_axes(base.axes)}",
                   f"{plan.set_id} {show_axes(member.axes)}"]


def _split_size(spec: dict[str, Any]) -> int | None:
    """The episodes the run of ``spec`` will deal, or None where they cannot be read here."""
    try:
        return len(dealt_order(spec))
    except Exception:  # any reason: the run itself refuses, in its own words
        return None


def _step_decider(args: argparse.Namespace, full_n: int | None, seed: int) -> Any:
    """STEP for this race (None: the CS decides, or not known yet while ``full_n`` is None;
    False: --decide-by step cannot be had)."""
    if (full_n is None or args.decide_by == "cs"
            or (args.decide_by is None and args.metric != "success")):
        return None
    n_max = min(full_n, STEP_MAX_PAIRS)

    def told(n: int, alpha: float, path: Path) -> None:
        note(f"synthesizing STEP's policy for n_max={n}, alpha={alpha} (once; kept in {path})")

    try:
        return StepDecider(load_policy(n_max, STEP_ALPHA, on_synthesis=told), seed)
    except StepUnavailable as exc:
        if args.decide_by == "step":
            error(str(exc))
            return False
        note(f"{exc}; success is decided by the betting CS")
        return None


def _follow(dirs: list[Path], procs: list[Any], args: argparse.Namespace, step: Any) -> Any:
    """Feed both runs' rows to the race until it is decided or both runs ended."""
    order = dealt_order(read_json(dirs[0] / "spec.json"))
    race = PairedRace(order, min_diff=args.min_diff, step=step)
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
        spent = step is not None and step.t >= step.n_max  # STEP can decide no more
        if race.winner is not None or ended or spent:
            return race
        time.sleep(POLL_SEC)


def _stop(procs: list[Any]) -> None:
    for proc in procs:
        if proc.poll() is None:
            terminate_group(spawned_ref(proc))
        proc.wait()


def _report(race: Any, answers: list[dict[str, Any]], dirs: list[Path],
            args: argparse.Namespace, seed: int, labels: list[str]) -> int:
    state = race.state()
    lo, hi = state.interval
    names = dict(zip(SIDES, labels, strict=True))
    step = race.step
    if step is not None:
        method = (f"STEP (Snyder et al., RSS 2025), {STEP_ALPHA:g} each way, n_max "
                  f"{step.n_max}; interval: betting confidence sequence of B - A, 95%")
        fixed_what = "a fixed-n two-proportion test of 80% power at 5% for the rates seen"
    else:
        method = "betting confidence sequence of the mean paired difference B - A, 95%"
        fixed_what = "a fixed-n paired design of 80% power at 5% for this difference"
    result = {"metric": args.metric, "winner": state.winner, "n": state.n,
              "decided_at": race.decided_at, "full_n": answers[0]["episodes"],
              "diff_b_minus_a": state.diff, "interval": [lo, hi],
              "decided_by": state.method, "method": method,
              "fixed_n_80_power": state.fixed_n, "order_seed": seed,
              "step": {"n_max": step.n_max, "alpha_each_way": STEP_ALPHA, "seed": step.seed}
              if step is not None else None,
              "sides": names, "runs": {"A": str(dirs[0]), "B": str(dirs[1])}}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    diff = f"{state.diff:+.3f}" if state.diff is not None else "-"
    found = f"B - A = {diff}, 95% CS [{lo:+.3f}, {hi:+.3f}]"
    if state.winner in SIDES:
        print(f"{state.winner} ({names[state.winner]}) is better on {args.metric}: {found}")
    elif state.winner == "neither":
        print(f"no difference beyond {args.min_diff}: {found}")
    else:
        print(f"undecided after {state.n} pairs: {found}")
    print(f"decided by: {method}")
    fixed = f"; {fixed_what} needs {state.fixed_n} per side" if state.fixed_n else ""
    at = (f", decided at pair {race.decided_at} (the rest were in flight)"
          if race.decided_at is not None and race.decided_at < state.n else "")
    print(f"episodes used: {state.n} pairs of {answers[0]['episodes']}{at}{fixed} "
          "(CS: confidence sequence, valid at the stop)")
    return 0
