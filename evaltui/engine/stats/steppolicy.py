"""STEP's policy table for (n_max, alpha): cached, shipped, or synthesized once.

STEP's policy (:mod:`evaltui.engine.stats.step`) is the output of a sequence of linear
programs over 129 worst-case null rates, one per pair count up to n_max (Snyder et al.,
RSS 2025, Sec. IV). evaltui does not re-implement that synthesis: it is the authors'
``run_step_policy_synthesis`` in ``sequentialized_barnard_tests`` (the ``step`` extra,
``pip install 'evaltui[step]'``; CC-BY-NC 4.0, so it is not a core dependency). Where to
find a table, first hit wins:

1. evaltui's cache, ``STATE_DIR/step_policies/n_max_{N}_alpha_{A}.pkl``;
2. a table the package ships (n_max 200 and 500 at alpha 0.05);
3. synthesized now by the package (about 6 s for n_max 100, 80 s for 200 on one core),
   then written to the cache.

Without the package and without a cached table, :class:`StepUnavailable` says so.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from evaltui.engine.stats.step import StepTable
from evaltui.rundir.layout import state_dir

PACKAGE = "sequentialized_barnard_tests"
N_POINTS = 129
"""Control points of the synthesis (the package's default)."""
MIN_N_MAX = 10
"""The shortest table the synthesis makes (its own bound)."""


class StepUnavailable(RuntimeError):
    """No STEP policy for these parameters, and no way to synthesize one here."""


def cache_path(n_max: int, alpha: float) -> Path:
    return state_dir() / "step_policies" / f"n_max_{n_max}_alpha_{alpha}.npz"


def package_dir() -> Path | None:
    """Where ``sequentialized_barnard_tests`` is installed (found, not imported), or None."""
    found = importlib.util.find_spec(PACKAGE)
    return Path(found.origin).parent if found and found.origin else None


def shipped_path(n_max: int, alpha: float) -> Path | None:
    root = package_dir()
    if root is None:
        return None
    path = (root / "policies" / f"n_max_{n_max}_alpha_{alpha}_shape_parameter_0.0_pnorm_False"
            / "policy_compressed.pkl")
    return path if path.is_file() else None


def load_policy(n_max: int, alpha: float, *, synthesize: bool = True,
                on_synthesis: Any = None) -> StepTable:
    """The table for (n_max, alpha) (raises StepUnavailable); ``on_synthesis(n_max, alpha,
    path)`` is called before a synthesis starts (it takes a while)."""
    if n_max < MIN_N_MAX:
        raise StepUnavailable(f"STEP needs at least {MIN_N_MAX} pairs (n_max={n_max})")
    cached = cache_path(n_max, alpha)
    if cached.is_file():
        return read_cache(cached, n_max)
    shipped = shipped_path(n_max, alpha)
    if shipped is not None:
        return read_table(shipped, n_max)
    if not synthesize or package_dir() is None:
        raise StepUnavailable(f"no STEP policy for n_max={n_max}, alpha={alpha}: install the "
                              f"step extra (pip install 'evaltui[step]') to synthesize one")
    target = cache_path(n_max, alpha)
    if on_synthesis is not None:
        on_synthesis(n_max, alpha, target)
    table = synthesize_table(n_max, alpha)
    write_cache(table, target)
    return table


def write_cache(table: StepTable, target: Path) -> None:
    """``table`` as one flat array and each cell's length (``.npz``, no pickle), atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    cells = [np.asarray(cell, dtype=float).ravel() for row in table for cell in row]
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as out:
        np.savez(out, flat=np.concatenate(cells), lengths=np.array([len(c) for c in cells]))
    os.replace(tmp, target)


def read_cache(path: Path, n_max: int) -> StepTable:
    """A table :func:`write_cache` wrote (StepUnavailable if it is not one for n_max)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            flat, lengths = data["flat"], data["lengths"]
    except (OSError, ValueError, KeyError) as exc:
        raise StepUnavailable(f"{path}: not a STEP policy ({exc})") from None
    if len(lengths) != (n_max + 1) * (n_max + 2) // 2 or int(lengths.sum()) != len(flat):
        raise StepUnavailable(f"{path}: not a STEP policy for n_max={n_max}")
    cells = iter(np.split(flat, np.cumsum(lengths)[:-1]))
    return [[next(cells) for _x in range(t + 1)] for t in range(n_max + 1)]


def read_table(path: Path, n_max: int) -> StepTable:
    """The package's own shipped table (its format, a pickle: list over t of lists over x
    of arrays). Read only from the installed package, whose code runs here anyway; evaltui's
    own cache is never a pickle."""
    with open(path, "rb") as f:
        table = pickle.load(f)
    if (not isinstance(table, list) or len(table) != n_max + 1
            or any(len(row) != t + 1 for t, row in enumerate(table))):
        raise StepUnavailable(f"{path}: not a STEP policy for n_max={n_max}")
    return [[np.asarray(cell, dtype=float) for cell in row] for row in table]


def synthesize_table(n_max: int, alpha: float) -> StepTable:
    """Run the package's synthesis with the shape priors its script uses for n_max."""
    root = package_dir()
    if root is None:
        raise StepUnavailable(f"{PACKAGE} is not installed (pip install 'evaltui[step]')")
    script = root / "scripts" / "synthesize_general_step_policy.py"
    spec = importlib.util.spec_from_file_location("_step_synthesis", script)
    if spec is None or spec.loader is None:
        raise StepUnavailable(f"{script}: cannot load STEP's synthesis")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # optional heavy dep (scipy LPs): only when synthesizing
    lam, axis = {200: (2.1, 1.15), 500: (2.2, 1.35)}.get(n_max, (2.1, 1.4))
    table, _risk, _points = module.run_step_policy_synthesis(n_max, alpha, N_POINTS, lam, axis)
    return [[np.asarray(cell, dtype=float) for cell in row] for row in table]
