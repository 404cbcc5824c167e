"""The cache of built environments: keyed by what was asked, built once under a lock,
from a requirements file or a PEP 723 header, and shown with --verbose."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaltui.engine.foreign.envcache import (
    MARKER,
    EnvBuildError,
    environment_key,
    script_metadata,
    what_to_install,
)
from evaltui.engine.foreign.envspec import parse_environment

SCRIPT = textwrap.dedent('''\
    # /// script
    # requires-python = ">=3.8"
    # dependencies = [
    #   "numpy<2",
    # ]
    # ///
    import numpy
    ''')


def test_the_key_is_what_was_asked_file_contents_included(tmp_path: Path) -> None:
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("numpy<2\n")
    a = environment_key(parse_environment({"requirements_file": str(reqs)}))
    assert a == environment_key(parse_environment({"requirements_file": str(reqs)}))
    reqs.write_text("numpy<2\ngymnasium\n")
    assert environment_key(parse_environment({"requirements_file": str(reqs)})) != a
    lst = parse_environment({"requirements": ["numpy<2"]})
    assert environment_key(lst) != environment_key(
        parse_environment({"requirements": ["numpy<2"], "python": "3.10"}))


def test_a_pep_723_header_gives_the_requirements_and_python(tmp_path: Path) -> None:
    script = tmp_path / "sim_server.py"
    script.write_text(SCRIPT)
    assert script_metadata(str(script))["dependencies"] == ["numpy<2"]
    assert what_to_install(parse_environment({"script": str(script)})) == (["numpy<2"], ">=3.8")
    script.write_text("import numpy\n")
    with pytest.raises(EnvBuildError, match="no PEP 723 header"):
        what_to_install(parse_environment({"script": str(script)}))


def test_two_runs_asking_at_once_build_once_and_verbose_shows_the_build(
        tmp_path: Path) -> None:
    script = tmp_path / "sim_server.py"
    script.write_text(SCRIPT)
    code = ("import sys; from evaltui.engine.foreign.envcache import ensure_built; "
            "from evaltui.engine.foreign.envspec import parse_environment; "
            f"print(ensure_built(parse_environment({{'script': {str(script)!r}}}), 'x'))")
    env = {**os.environ, "EVALTUI_ENV_CACHE": str(tmp_path / "cache"), "EVALTUI_VERBOSE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    pythons = {out.strip() for out, _ in outs}
    assert len(pythons) == 1
    built = [err for _, err in outs if "building the environment" in err]
    assert len(built) == 1, "the second waited on the lock, then reused the first's"
    assert "numpy" in built[0]  # --verbose: the builder's own output
    (python,) = pythons
    assert (Path(python).parents[1] / MARKER).exists()
    version = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"],
                             capture_output=True, text=True, check=True).stdout
    assert version.startswith("1.")


def test_a_foreground_build_says_it_is_still_going(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``evaltui eval`` builds in the foreground: a line every HEARTBEAT_SEC while it lasts
    (a real build of a package whose build waits for a gate, tests/gatedpkg.py)."""
    import threading

    from gatedpkg import builders, gated_package

    from evaltui.engine.foreign import envcache
    from evaltui.engine.foreign.envcache import ensure_built

    requirement, gate = gated_package(tmp_path / "pkg")
    monkeypatch.setenv("EVALTUI_ENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALTUI_VERBOSE", raising=False)
    monkeypatch.setattr(envcache, "HEARTBEAT_SEC", 0.2)
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("still building") and builders(tmp_path / "pkg"):
            gate.touch()  # it said so while blocked on the gate: let it finish

    env = parse_environment({"requirements": [requirement]})
    found: list[Path] = []
    worker = threading.Thread(target=lambda: found.append(ensure_built(env, "nodeset 'env'",
                                                                       say=say)))
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive() and found, said
    assert said[0].startswith("building the environment of nodeset 'env' with ")
    assert any(re.fullmatch(r"still building the environment of nodeset 'env' \(\d+ s so "
                            r"far\)", line) for line in said), said
    assert said[-1].startswith("built the environment of nodeset 'env' in ")
    assert subprocess.run([str(found[0]), "-c", "import gatedpkg"], check=False).returncode == 0
