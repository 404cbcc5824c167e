"""The executor choice is one table (``engine/executor/kinds.py``): every name a spec may
give is in it, the run builds each by that name, and asking it imports no executor."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import get_args

from evaltui.contract.setspec import BaseOptions
from evaltui.contract.spec import EvalSection, JobSpec
from evaltui.engine.executor.kinds import EXECUTORS, LOCAL, executor_kind, executor_of
from evaltui.engine.run.runner import BatchEvalRunner


def test_every_executor_a_spec_names_is_in_the_table_and_built_by_the_run() -> None:
    names = set(get_args(EvalSection.model_fields["executor"].annotation))
    assert set(EXECUTORS) == names == set(BatchEvalRunner._BUILDERS)
    assert set(get_args(get_args(BaseOptions.model_fields["executor"].annotation)[0])) == names


def test_a_spec_as_read_or_parsed_names_its_executor() -> None:
    spec = {"graph": {}, "eval": {"executor": "slurm"}}
    assert executor_of(spec) is EXECUTORS["slurm"] is executor_of(JobSpec.model_validate(spec))
    assert executor_of(spec).batch and executor_of(spec).workers_elsewhere
    for unknown in ({}, {"eval": None}, {"eval": {"executor": "pbs"}}, None):
        assert executor_of(unknown) is LOCAL  # the spec's check names a wrong one
    assert executor_kind(None) is LOCAL and not LOCAL.workers_elsewhere
    assert LOCAL.missing() is None


def test_asking_whether_ray_is_there_imports_no_executor() -> None:
    code = ("import json, sys; from evaltui.engine.executor.kinds import EXECUTORS; "
            "[k.missing() for k in EXECUTORS.values()]; json.dump(sorted(sys.modules), "
            "sys.stdout)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    loaded = json.loads(done.stdout)
    assert not [m for m in loaded if m == "ray" or m.startswith(("ray.", "pydantic"))]
    assert not [m for m in loaded if m.startswith("evaltui.engine.executor.")
                and m != "evaltui.engine.executor.kinds"]
