"""``evaltui set run|resume|cancel`` of a set whose members go to Slurm as one job array:
``--executor slurm`` or the set file's ``base.executor: slurm`` (docs/slurm.md, "Sets as
job arrays").

``set run FILE --executor slurm`` checks the set file (exit 2 and one line, nothing
written), submits one array (``--array=0-5%P``, at most P members at once:
``base.slurm_array_parallelism`` or ``--slurm-array-parallelism``, default 4), follows
it from here and prints the set's table; the options given here are written into
set.json's copy of the file, so ``set resume`` and ``set cancel`` know them. Run again,
or ``set resume``: the members that did not end ``done`` and are not in Slurm's queue go
in one new array (their run dirs re-run only the episodes not ``ok``). ``set cancel``:
scancel of the arrays. Ctrl-C stops following; the array goes on.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from evaltui.commands.console import warning as say_warning
from evaltui.contract.setspec import MemberState, SetFileError, SetMemberRecord, SetRecord
from evaltui.sets.slurmarray import DEFAULT_ARRAY_PARALLELISM, ArrayManifest, ArrayTask
from evaltui.sets.slurmfollow import refresh

POLL_SEC = 0.5


def add_options(p: argparse.ArgumentParser) -> None:
    """``--executor slurm`` and the ``--slurm-*`` options of ``set run``/``resume``."""
    from evaltui.commands.eval import add_slurm_arguments

    p.add_argument("--executor", choices=("slurm",), default=None,
                   help="run the members as one Slurm job array (as base.executor: slurm)")
    add_slurm_arguments(p)
    p.add_argument("--slurm-array-parallelism", type=int, default=None, metavar="P",
                   help="--executor slurm: members running at once (default: "
                   f"base.slurm_array_parallelism, else {DEFAULT_ARRAY_PARALLELISM})")


def wanted(args: argparse.Namespace, kind: str) -> bool:
    """This set's members go to Slurm as an array (the option, or the set's own word)."""
    if getattr(args, "executor", None) == "slurm":
        return True
    base = _file_and_dir(args, kind)[0].get("base")
    return isinstance(base, dict) and base.get("executor") == "slurm"


def _file_and_dir(args: argparse.Namespace, kind: str) -> tuple[dict[str, Any], Path]:
    """The set file (for ``run``: with the Slurm options an earlier ``set run`` of this
    set gave on its command line, which set.json keeps) and its directory."""
    from evaltui.sets.setdir import SetDirError, read_set, set_dir

    data, base_dir = _given_file_and_dir(args, kind)
    name = data.get("name")
    if kind != "run" or not isinstance(name, str):
        return data, base_dir
    try:
        earlier = dict(read_set(set_dir(name, args.outputs)).file.get("base") or {})
    except (SetDirError, ValueError):
        return data, base_dir
    if earlier.get("executor") != "slurm":
        return data, base_dir
    base = {str(k).replace("-", "_"): v for k, v in dict(data.get("base") or {}).items()}
    for key in ("executor", "slurm", "slurm_array_parallelism"):
        if key in earlier and key not in base:
            base[key] = earlier[key]
    return {**data, "base": base}, base_dir


def _given_file_and_dir(args: argparse.Namespace, kind: str) -> tuple[dict[str, Any], Path]:
    from evaltui.contract.setspec import load_set_file
    from evaltui.sets.setdir import read_set, resolve_set

    if kind == "run":
        data = load_set_file(Path(args.file))[1]
        return (data if isinstance(data, dict) else {}), Path(args.file).resolve().parent
    record = read_set(resolve_set(args.set, args.outputs))
    return dict(record.file), Path(record.base_dir)


def _with_options(data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The set file with this command's Slurm options in its ``base``."""
    from evaltui.commands.eval import slurm_from_args

    data = dict(data)
    base = {str(k).replace("-", "_"): v for k, v in dict(data.get("base") or {}).items()}
    base["executor"] = "slurm"
    if slurm := slurm_from_args(args):
        base["slurm"] = {**dict(base.get("slurm") or {}), **slurm}
    if args.slurm_array_parallelism is not None:
        base["slurm_array_parallelism"] = args.slurm_array_parallelism
    data["base"] = base
    return data


def run_command(args: argparse.Namespace, kind: str, options: Any) -> int:
    """``set run``/``set resume`` of an array set; the exit code."""
    from evaltui.commands.console import error
    from evaltui.sets.plan import plan_data
    from evaltui.sets.setdir import SetBusy, SetDirError, hold_set
    from evaltui.slurm.commands import SlurmError

    console = Console(stderr=True, soft_wrap=True)  # piped: lines whole, never folded
    try:
        if options.retries or options.max_error_rate is not None:
            raise SetFileError("--retries" if options.retries else "--max-error-rate",
                               "not with --executor slurm (`evaltui set resume` submits "
                               "the members that did not end done again)")
        if options.max_parallel is not None:
            raise SetFileError("--max-parallel", "not with --executor slurm (use "
                               "--slurm-array-parallelism)")
        data, base_dir = _file_and_dir(args, kind)
        plan = plan_data(_with_options(data, args), base_dir, args.outputs, check=True)
        parallelism = plan.setfile.base.slurm_array_parallelism or DEFAULT_ARRAY_PARALLELISM
    except (SetFileError, SetDirError) as exc:
        return error(str(exc))
    for warning in plan.warnings:
        say_warning(warning)
    existed = plan.path.exists()
    try:
        with hold_set(plan.path):
            try:
                record, manifest, job = _submit(plan, args, parallelism)
            except (SlurmError, SetFileError) as exc:
                if not existed:  # refused: nothing left behind
                    shutil.rmtree(plan.path, ignore_errors=True)
                return error(str(exc))
            what = f"Slurm array job {job} (at most {parallelism} at once)" if job else \
                "nothing to submit (every member done or in Slurm's queue)"
            console.print(f"set [bold]{plan.set_id}[/]: {len(record.members)} members, "
                          f"{what} -> {plan.path}", highlight=False)
            if args.detach:
                return 0
            interrupted = _follow_here(record, manifest, plan, console)
    except SetBusy as exc:
        return error(str(exc), 1)
    from evaltui.commands.set_show import print_table
    from evaltui.commands.sets import exit_code

    if interrupted:
        console.print(f"stopped following; the array goes on (`evaltui set run` again "
                      f"follows it, `evaltui set cancel {plan.set_id}` stops it)")
    print_table(record, args, as_json=args.json)
    return 130 if interrupted else exit_code(record, False, console)


def _submit(plan: Any, args: argparse.Namespace, parallelism: int
            ) -> tuple[SetRecord, ArrayManifest, str | None]:
    """set.json merged with the plan; the due members submitted as one array (held until
    their run dirs and the manifest are written). Raises SlurmError before writing."""
    from evaltui.contract.setspec import SET_FILENAME
    from evaltui.rundir.store import update_scheduler_record
    from evaltui.sets import slurmarray as arr
    from evaltui.sets.setdir import read_set, write_set
    from evaltui.sets.slurmfollow import queued_tasks
    from evaltui.slurm.control import cancel

    old = {m.key: m for m in read_set(plan.path).members} \
        if (plan.path / SET_FILENAME).is_file() else {}
    members = []
    for m in plan.expansion.members:
        rec = old.get(m.key) or SetMemberRecord(key=m.key, axes=m.axes)
        rec.axes = m.axes
        members.append(rec)
    record = SetRecord(set_id=plan.set_id, name=plan.setfile.name, file=plan.file,
                       base_dir=str(plan.expansion.base_dir), members=members)
    manifest = ArrayManifest.read(plan.path)
    # set.json may be behind (a --detach, a follower stopped): each submitted member's
    # state read first, so that a member whose run ended done is not run again
    refresh(record, manifest, plan.path)
    in_queue = {manifest.tasks[int(t.split("_")[1])].key for t in queued_tasks(manifest)}
    due = []
    for member, rec in zip(plan.expansion.members, members, strict=True):
        if rec.state is MemberState.DONE or rec.key in in_queue:
            continue
        index = manifest.index_of(rec.key)
        manifest.tasks.setdefault(index, ArrayTask("", "", rec.key))  # taken
        due.append((index, rec, member))
    if not due:
        write_set(plan.path, record)
        return record, manifest, None
    specs = [member.spec for _, _, member in due]
    try:
        slurm = arr.member_slurm(specs)
    except ValueError as exc:
        raise SetFileError("base.slurm", str(exc)) from None
    job = arr.submit_held(plan.path, plan.set_id, [i for i, _, _ in due], slurm,
                          arr.array_tasks(specs), parallelism)
    try:
        for index, rec, member in due:
            run_dir = Path(rec.run_dir) if rec.run_dir else None
            if run_dir is not None and run_dir.is_dir():
                arr.requeue_member_run(run_dir)
            else:
                run_dir = arr.write_member_run(member.spec, args.outputs)
            update_scheduler_record(run_dir, slurm_job_id=f"{job}_{index}")
            rec.run_id, rec.run_dir, rec.state, rec.error = run_dir.name, str(run_dir), \
                MemberState.QUEUED, None
            rec.attempts += 1
            manifest.tasks[index] = ArrayTask(str(run_dir), job, rec.key)
        manifest.jobs.append(job)
        (plan.path / arr.LOG_DIRNAME).mkdir(exist_ok=True)
        manifest.write(plan.path)
        write_set(plan.path, record)
        arr.release(job)
    except BaseException:
        cancel(job)  # held: none of its tasks has started
        raise
    return record, manifest, job


def _follow_here(record: SetRecord, manifest: ArrayManifest, plan: Any,
                 console: Console) -> bool:
    """Follow the members until each has finished; True on Ctrl-C."""
    from evaltui.commands.set_follow import FollowPrinter
    from evaltui.slurm.commands import SlurmError

    printer = FollowPrinter(console, plan.set_id)
    said = None
    try:
        while True:
            try:
                if refresh(record, manifest, plan.path, printer):
                    break
            except SlurmError as exc:  # the controller busy or away: ask again
                if str(exc) != said:
                    say_warning(str(exc))
                    said = str(exc)
            time.sleep(POLL_SEC)
    except KeyboardInterrupt:
        return True
    finally:
        printer.close()
    return False


def cancel_array(args: argparse.Namespace, path: Path) -> int:
    """``set cancel`` of an array set (:func:`evaltui.sets.slurmcancel.cancel_arrays`)."""
    from evaltui.commands.console import error
    from evaltui.sets.setdir import SetDirError
    from evaltui.sets.slurmcancel import cancel_arrays
    from evaltui.slurm.commands import SlurmError

    try:
        done = cancel_arrays(path)
    except SetDirError as exc:
        return error(str(exc))
    except SlurmError as exc:
        return error(str(exc), 1)
    Console().print(f"set {done.set_id}: scancel of Slurm array job(s) "
                    f"{', '.join(done.jobs) or '(none in the queue)'} ({done.tasks} task(s) "
                    "queued or running)", highlight=False)
    return 0
