"""Environments evaltui builds for nodesets: keyed by what was asked, built once, reused.

The key is a hash of what was asked (the requirements, the Python asked for, the bytes of
a requirements file or a script's PEP 723 header): the same request gives the same
environment, in every later run and every user's run that can read the cache
(``EVALTUI_ENV_CACHE``; default ``~/.cache/evaltui/envs``). Under the cache root::

    <key>/          the environment (a venv); ``<key>/.evaltui-built`` is written last
    <key>.lock      held (flock) while it is built: a second run waits, then reuses it
    <key>.log       the builds' output (appended: one ``$ ... venv`` line per build), named
                    by the error when the build fails

A scheduler builds on a builder thread while the run waits in ``queued``
(:mod:`evaltui.scheduler.runs.envbuilds`); ``evaltui eval`` builds in the foreground,
saying how long it has taken every :data:`HEARTBEAT_SEC`. The build's steps die with the
process that started them (PR_SET_PDEATHSIG): a scheduler killed mid-build leaves no
builder writing into the cache, and the next one, finding no marker, builds again.

Built with ``uv`` (``uv venv`` + ``uv pip install``) where uv is installed, else ``python -m
venv`` + pip. A failed build leaves no environment behind, only its log.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaltui.contract.settings import settings
from evaltui.engine.foreign.envspec import NodesetEnvironment
from evaltui.engine.processes.pdeathsig import arm_pdeathsig, prepare_pdeathsig
from evaltui.engine.usererrors import verbose

BUILDER_VERSION = 1
"""Part of every key: a change to how environments are built makes new ones."""
MARKER = ".evaltui-built"
_PEP723 = re.compile(r"^# /// script$\s(?P<body>(^#(| .*)$\s)+)^# ///$", re.MULTILINE)
"""PEP 723's own reference expression, for its ``script`` block."""
HEARTBEAT_SEC = 10.0
"""How often a foreground build says it is still going."""

Say = Callable[[str], None]
"""Where a build's progress lines go (stderr in the foreground; nowhere in a scheduler)."""


def say_on_stderr(line: str) -> None:
    print(f"evaltui: {line}", file=sys.stderr, flush=True)


class EnvBuildError(RuntimeError):
    """An environment could not be built; the message names its build log."""


def cache_root() -> Path:
    configured = settings().env_cache
    return Path(configured) if configured else Path.home() / ".cache" / "evaltui" / "envs"


def script_metadata(path: str) -> dict[str, Any]:
    """A script's PEP 723 ``# /// script`` block (``dependencies``, ``requires-python``)."""
    text = Path(path).read_text()
    match = _PEP723.search(text)
    if match is None:
        raise EnvBuildError(f"{path}: no PEP 723 header (a '# /// script' block)")
    body = "".join(line[2:] if line.startswith("# ") else line[1:]
                   for line in match.group("body").splitlines(keepends=True))
    try:
        return tomllib.loads(body)
    except tomllib.TOMLDecodeError as exc:
        raise EnvBuildError(f"{path}: its PEP 723 header is not TOML: {exc}") from None


def what_to_install(env: NodesetEnvironment) -> tuple[list[str], str | None]:
    """The requirement lines and the Python asked for (None: evaltui's own)."""
    if env.form == "requirements":
        return list(env.requirements), env.python
    if env.form == "requirements_file":
        assert env.requirements_file is not None
        return ["-r", env.requirements_file], env.python
    assert env.script is not None
    meta = script_metadata(env.script)
    deps = meta.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise EnvBuildError(f"{env.script}: PEP 723 'dependencies' must be a list of strings")
    python = env.python or meta.get("requires-python")
    return list(deps), python


def environment_key(env: NodesetEnvironment) -> str:
    """The hash of what was asked (file contents, not only their names)."""
    asked: dict[str, Any] = {"builder": BUILDER_VERSION, "form": env.form,
                             "python": env.python or _own_python()}
    if env.form == "requirements":
        asked["requirements"] = list(env.requirements)
    elif env.form == "requirements_file":
        assert env.requirements_file is not None
        asked["file"] = Path(env.requirements_file).read_bytes().decode(errors="replace")
    else:
        asked["script"] = what_to_install(env)
    blob = json.dumps(asked, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def _own_python() -> str:
    return ".".join(map(str, sys.version_info[:3]))


def env_python(prefix: Path) -> Path:
    return prefix / "bin" / "python"


def builder() -> str:
    """``uv`` where it is installed, else ``pip``."""
    return "uv" if _uv_argv() else "pip"


def _uv_argv() -> list[str] | None:
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    found = shutil.which("uv")
    return [found] if found else None


def is_built(env: NodesetEnvironment) -> bool:
    """Whether the cache holds ``env``'s environment (always True for a form evaltui does
    not build)."""
    return not env.built or (cache_root() / environment_key(env) / MARKER).exists()


def ensure_built(env: NodesetEnvironment, label: str, say: Say = say_on_stderr) -> Path:
    """The interpreter of ``env``'s environment, built first if the cache lacks it."""
    root = cache_root()
    key = environment_key(env)
    prefix = root / key
    if (prefix / MARKER).exists():
        return env_python(prefix)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run building the same: wait, then reuse
        if not (prefix / MARKER).exists():
            _build(env, prefix, root / f"{key}.log", label, say)
    return env_python(prefix)


def _build(env: NodesetEnvironment, prefix: Path, log_path: Path, label: str,
           say: Say) -> None:
    reqs, python = what_to_install(env)
    uv = _uv_argv()
    shutil.rmtree(prefix, ignore_errors=True)  # an earlier build that died half-way
    started = time.monotonic()
    say(f"building the environment of {label} with {'uv' if uv else 'pip'} in {prefix} "
        f"(log: {log_path})")
    if uv:
        steps = [uv + ["venv", "--python", python or sys.executable, str(prefix)],
                 uv + ["pip", "install", "--python", str(env_python(prefix)), *reqs]]
    else:
        base = sys.executable if python is None else shutil.which(f"python{python}")
        if base is None:
            raise EnvBuildError(f"cannot build the environment of {label}: no python{python} "
                                "on PATH (install uv to fetch other Pythons)")
        steps = [[base, "-m", "venv", str(prefix)],
                 [str(env_python(prefix)), "-m", "pip", "install", *reqs]]
    with open(log_path, "a") as log:
        for argv in steps:
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            code = _run_logged(argv, log, started, label, say)
            if code != 0:
                shutil.rmtree(prefix, ignore_errors=True)
                raise EnvBuildError(f"cannot build the environment of {label}: "
                                    f"{_last_error(log_path)} (build log: {log_path})")
        (prefix / MARKER).write_text(json.dumps({
            "asked": env.to_dict(), "requirements": reqs, "builder": "uv" if uv else "pip",
            "seconds": round(time.monotonic() - started, 1)}))
    say(f"built the environment of {label} in {time.monotonic() - started:.1f} s")


def _die_with_parent() -> None:
    arm_pdeathsig()  # the step's only work before exec: one prctl (safe beside threads)


def _run_logged(argv: list[str], log: Any, started: float, label: str, say: Say) -> int:
    """Run one build step, its output into ``log`` (and to stderr with --verbose; else a
    line every HEARTBEAT_SEC saying how long the build has taken)."""
    prepare_pdeathsig()
    if not verbose():
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        while True:
            try:
                return proc.wait(timeout=HEARTBEAT_SEC)
            except subprocess.TimeoutExpired:
                say(f"still building the environment of {label} "
                    f"({time.monotonic() - started:.0f} s so far)")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, preexec_fn=_die_with_parent)
    assert proc.stdout is not None
    for line in proc.stdout:
        log.write(line)
        sys.stderr.write(line)
    return proc.wait()


def _last_error(log_path: Path) -> str:
    """The build log's most telling line: its last ``error``/``ERROR`` line with the
    ``cause:`` lines uv puts under it, else its last line."""
    lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines()
             if ln.strip() and not ln.startswith("$ ")]
    found = [i for i, ln in enumerate(lines) if re.match(r"^(error|ERROR|×)\b", ln)]
    if not found:
        return lines[-1] if lines else "the builder said nothing"
    at = found[-1]
    causes = [re.sub(r"^(cause:|╰─▶)\s*", "", ln) for ln in lines[at + 1:]
              if re.match(r"^(cause:|╰─▶)", ln)]
    return "; ".join([re.sub(r"^(error:|ERROR:|×)\s*", "", lines[at]), *causes])
