"""``evaltui compare RUN_A RUN_B``: paired comparison of two runs on the same episodes.

Reads both run dirs locally (no backend), matches episodes by episode_id and reports,
per metric, mean A, mean B and B - A with a paired bootstrap 95% CI, an exact McNemar
test on success and the episodes that flipped. Output: a rich table, ``--json`` (a
stable document for scripts) or ``--format md|csv|latex`` (the table alone, for a
paper). Exit codes: 0 compared, 2 bad input (no such run, mismatched episode sets,
duplicate episode ids).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rich.console import Console

from evaltui.commands.console import error, warning
from evaltui.results.compare import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    CompareError,
    Comparison,
    EpisodeSetMismatch,
    Flip,
    compare_rows,
)
from evaltui.results.runrows import RunDirError, RunRows, load_run, resolve_run_dir
from evaltui.results.tables import FORMATS, compare_table, comparison_table

_FLIPS_SHOWN = 20


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare",
                       description="Compare run B against run A episode by episode: per-"
                       "metric mean difference with a paired bootstrap 95%% CI, an exact "
                       "McNemar test on success and the episodes that flipped. RUN_A and "
                       "RUN_B are run dirs or run ids under the outputs root.")
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run (dir or run id)")
    p.add_argument("run_b", metavar="RUN_B", help="the run compared against it")
    p.add_argument("--intersect", action="store_true",
                   help="compare the episodes both runs have (default: differing episode "
                   "sets are an error)")
    p.add_argument("--resamples", type=_positive_int, default=DEFAULT_RESAMPLES,
                   help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=_non_negative_int, default=DEFAULT_SEED,
                   help=f"bootstrap seed (default {DEFAULT_SEED})")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON output for scripts")
    out.add_argument("--format", choices=FORMATS,
                     help="print only the table, as Markdown, CSV or LaTeX (booktabs)")
    p.add_argument("--digits", type=_non_negative_int, default=None,
                   help="decimals in --format tables (default 3; CSV: every digit)")
    p.add_argument("--outputs", help="outputs root for run ids (default $EVALTUI_OUTPUTS "
                   "or ./outputs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        run_a = load_run(resolve_run_dir(args.run_a, outputs=args.outputs))
        run_b = load_run(resolve_run_dir(args.run_b, outputs=args.outputs))
        result = compare_rows(run_a.rows, run_b.rows, intersect=args.intersect,
                              resamples=args.resamples, seed=args.seed)
    except EpisodeSetMismatch as exc:
        return error(f"{exc} (--intersect compares the {exc.shared} shared episodes)")
    except (RunDirError, CompareError) as exc:
        return error(str(exc))
    for problem in run_a.problems + run_b.problems:
        warning(f"unreadable, skipped: {problem}")
    try:
        if args.json:
            print(json.dumps(comparison_document(result, run_a, run_b), indent=2))
        elif args.format:
            sys.stdout.write(compare_table(result, fmt=args.format, digits=args.digits,
                                           label_a=_label(run_a), label_b=_label(run_b)))
        else:
            _print_human(Console(), result, run_a, run_b)
        sys.stdout.flush()
    except BrokenPipeError:
        # `evaltui compare ... | head`: the reader left; no second error at exit's flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def comparison_document(result: Comparison, run_a: RunRows, run_b: RunRows) -> dict[str, Any]:
    """The ``--json`` document: every field always present, in a fixed order."""
    return {
        "run_a": _header(run_a),
        "run_b": _header(run_b),
        "n_pairs": result.n_pairs,
        "dropped": {"only_a": len(result.dropped_a), "only_b": len(result.dropped_b),
                    "only_a_ids": result.dropped_a, "only_b_ids": result.dropped_b},
        "bootstrap": {"method": "paired percentile", "level": 0.95,
                      "resamples": result.resamples, "seed": result.seed},
        "metrics": [{"name": m.name, "n": m.n, "mean_a": m.mean_a, "mean_b": m.mean_b,
                     "diff": m.diff, "ci95": list(m.ci95) if m.ci95 else None}
                    for m in result.metrics],
        "mcnemar": None if result.mcnemar is None else {
            "b": result.mcnemar.b, "c": result.mcnemar.c, "n": result.mcnemar.n,
            "p_value": result.mcnemar.p_value},
        "flips": {"lost": [_flip(f) for f in result.lost],
                  "gained": [_flip(f) for f in result.gained]},
    }


def _print_human(console: Console, result: Comparison, run_a: RunRows, run_b: RunRows) -> None:
    # soft_wrap: long lines (run dir paths) stay whole, to copy and paste.
    for side, run in (("A", run_a), ("B", run_b)):
        console.print(f"{side}: [bold]{_label(run)}[/]  [dim]{run.run_dir}[/]",
                      highlight=False, soft_wrap=True)
    if result.dropped_a or result.dropped_b:
        console.print(f"[yellow]--intersect: left out {len(result.dropped_a)} episodes only in "
                      f"A and {len(result.dropped_b)} only in B[/]", highlight=False,
                      soft_wrap=True)
    console.print(comparison_table(result))
    # Two lines: one line of both is 94 columns, past an 80-column terminal.
    console.print(f"{result.n_pairs} episode pairs; 95% CI of B - A: paired bootstrap,",
                  highlight=False, soft_wrap=True)
    console.print(f"  percentile method, {result.resamples} resamples, seed {result.seed}",
                  highlight=False, soft_wrap=True)
    test = result.mcnemar
    if test is None:
        console.print("McNemar: no success metric in both runs")
        return
    console.print(f"McNemar exact (success): b = {test.b} (A ok, B fail), c = {test.c} "
                  f"(A fail, B ok), p = {test.p_value:.4g}", highlight=False, soft_wrap=True)
    for title, flips in (("A success -> B failure", result.lost),
                         ("A failure -> B success", result.gained)):
        if not flips:
            continue
        console.print(f"{title} ({len(flips)}):", highlight=False, soft_wrap=True)
        for flip in flips[:_FLIPS_SHOWN]:
            console.print(f"  {flip.episode_id}  ep {_index_text(flip)}", highlight=False,
                          markup=False, soft_wrap=True)
        if len(flips) > _FLIPS_SHOWN:
            console.print(f"  ... and {len(flips) - _FLIPS_SHOWN} more (--json lists all)")


def _header(run: RunRows) -> dict[str, Any]:
    return {"run_id": run.run_id, "run_dir": str(run.run_dir), "graph_name": run.graph_name,
            "dataset": run.dataset, "split": run.split}


def _label(run: RunRows) -> str:
    return f"{run.run_id} ({run.graph_name})" if run.graph_name else run.run_id


def _flip(flip: Flip) -> dict[str, Any]:
    return {"episode_id": flip.episode_id, "index_a": flip.index_a, "index_b": flip.index_b}


def _index_text(flip: Flip) -> str:
    if flip.index_a == flip.index_b:
        return str(flip.index_a)
    return f"{flip.index_a} in A, {flip.index_b} in B"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value
