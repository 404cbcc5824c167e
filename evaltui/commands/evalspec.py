"""``evaltui eval``'s spec, built from its options (``submit``'s too) and handed over to the
run process, which :mod:`evaltui.commands.eval` started before importing this module: the
spec builder (pydantic) loads while the run process starts."""

from __future__ import annotations

import argparse
import os
from typing import Any

from evaltui.commands.console import FAILED, INTERRUPTED, error, note
from evaltui.commands.eval import slurm_from_args
from evaltui.commands.evalstart import DeferredInterrupt, RunProcess, discard, hand_over
from evaltui.contract.spec import SpecError
from evaltui.engine.executor.kinds import executor_of
from evaltui.engine.graph.specbuild import build_spec


def auto_workers() -> int:
    """``--workers auto``: K from the cores the machine-wide ledger leaves free."""
    # start-up: the ledger and its settings only for --workers auto, not before every
    # hand-over of the spec
    from evaltui.scheduler import procs
    from evaltui.scheduler.admission.cores import auto_workers as from_cores
    from evaltui.scheduler.admission.ledger import Ledger

    held = sum(r.cpus for r in Ledger().entries()
               if procs.alive(r.holder_pid, r.holder_create_time))
    return from_cores(held)


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The JobSpec dict that ``eval``/``submit`` options describe."""
    spec = build_spec(args.target, demo=args.demo, dataset=args.dataset, split=args.split,
                      episodes=args.episodes, start=args.start, indices=args.indices,
                      workers=auto_workers() if args.workers == "auto" else args.workers,
                      step_budget=args.step_budget,
                      step_timeout=args.step_timeout, max_error_rate=args.max_error_rate,
                      executor=args.executor, ray_address=args.ray_address,
                      slurm=slurm_from_args(args), sets=args.set, workspace=args.workspace,
                      replicas=args.replicas, stop_when=args.stop_when,
                      order_seed=args.order_seed, max_episodes=args.max_episodes)
    frames = args.frames
    graph = spec.get("graph")
    if frames and isinstance(graph, dict) and isinstance(graph.get("loop"), dict):
        # The loop env's ``frames`` param (Meta-World's); spec check refuses an env
        # without one, and a bad value, in one line.
        selectors = spec.setdefault("eval", {}).setdefault("selectors", {})
        selectors[f"{graph['loop'].get('env')}.frames"] = frames
    return spec


def wants_submission(spec: dict[str, Any]) -> bool:
    """A Slurm run asked for outside an allocation: it must be submitted. (Inside one --
    an salloc shell, a batch script -- the run process runs here and its workers are steps
    of that allocation.)"""
    return executor_of(spec).batch and not os.environ.get("SLURM_JOB_ID")


def hand_over_spec(args: argparse.Namespace, early: RunProcess, interrupt: DeferredInterrupt
                   ) -> dict[str, Any] | int:
    """Build the spec and hand it over: the run process's answer, or the exit code (2: the
    spec was refused, here or by the run process; 130: Ctrl-C before the run existed; a
    Slurm run's, followed to its end)."""
    try:
        spec = spec_from_args(args)
    except BaseException as exc:
        discard(early)
        if not isinstance(exc, SpecError):
            raise
        return error(str(exc))
    if interrupt.seen:
        discard(early)
        return _cancelled_before_start()
    if wants_submission(spec):  # the run process runs as the batch step of a Slurm job
        discard(early)
        # start-up: Slurm's side, and the spec check it does here, for a Slurm run only:
        # a local run's spec is checked by the run process (this one never imports it)
        from evaltui.commands.slurmeval import submit_and_follow

        return submit_and_follow(args, spec, interrupt)
    answer = hand_over(early, spec, args.outputs)
    if answer is None:
        code = early.proc.wait()
        if interrupt.seen:
            return _cancelled_before_start()
        return error(f"the run process ended (exit code {code}) before it took the spec; "
                     "its output is above", FAILED)
    if "refused" in answer:
        early.proc.wait()  # it wrote nothing and exits at once
        return error(answer["refused"])
    return answer


def _cancelled_before_start() -> int:
    note("cancelled before the run started (no run dir)")
    return INTERRUPTED
