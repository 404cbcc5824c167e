"""The executor options of ``evaltui set run|resume``: ``--executor slurm`` (or the set
file's ``base.executor: slurm``) and ``--slurm-*`` (docs/slurm.md, "Sets as job arrays").

They go into the set file's ``base`` before it is planned, so set.json's copy of the file
keeps them: ``set resume``, ``set cancel`` and a second ``set run`` know them. The set is
then run as any other, by a SetRunner over the target its executor asks for
(``api/settarget.open_target``: Slurm job arrays for a batch executor).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evaltui.commands.eval import slurm_from_args
from evaltui.contract.setspec import load_set_file
from evaltui.engine.executor.kinds import executor_kind
from evaltui.sets.setdir import SetDirError, read_set, resolve_set, set_dir

_KEPT = ("executor", "slurm", "slurm_array_parallelism")
"""The ``base`` keys a set run again keeps from set.json when its file does not say."""


def is_batch(data: dict[str, Any]) -> bool:
    """The set file's members go to a batch system (``base.executor: slurm``)."""
    base = data.get("base")
    return isinstance(base, dict) and executor_kind(base.get("executor")).batch


def file_and_dir(args: argparse.Namespace, kind: str) -> tuple[dict[str, Any], Path]:
    """The set file of ``set run`` (as given, with the executor options an earlier ``set
    run`` of this set gave, which set.json keeps) or ``set resume`` (set.json's copy), with
    this command's executor options in its ``base``; and its directory. SetFileError,
    SetDirError."""
    if kind == "run":
        data = load_set_file(Path(args.file))[1]
        data, base_dir = (data if isinstance(data, dict) else {}), Path(args.file).resolve().parent
        data = _with_earlier(data, args)
    else:
        record = read_set(resolve_set(args.set, args.outputs))
        data, base_dir = dict(record.file), Path(record.base_dir)
    if args.executor is None and not is_batch(data):
        return data, base_dir
    base = _base(data)
    base["executor"] = args.executor or base["executor"]
    if slurm := slurm_from_args(args):
        base["slurm"] = {**dict(base.get("slurm") or {}), **slurm}
    if args.slurm_array_parallelism is not None:
        base["slurm_array_parallelism"] = args.slurm_array_parallelism
    return {**data, "base": base}, base_dir


def _with_earlier(data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    name = data.get("name")
    if not isinstance(name, str):
        return data
    try:
        earlier = read_set(set_dir(name, args.outputs)).file
    except (SetDirError, ValueError):
        return data
    if not is_batch(earlier):
        return data
    base, before = _base(data), _base(earlier)
    return {**data, "base": {**{k: before[k] for k in _KEPT if k in before}, **base}}


def _base(data: dict[str, Any]) -> dict[str, Any]:
    """``data``'s base, its keys as the model spells them (``slurm_array_parallelism``)."""
    return {str(k).replace("-", "_"): v for k, v in dict(data.get("base") or {}).items()}
