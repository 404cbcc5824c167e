"""A real package whose build waits for a gate: ``uv pip install`` (or pip) of it takes as
long as the test wants, so a test can look at a run while its environment is built, or
kill the scheduler mid-build.

Its in-tree PEP 517 backend (no build requirements: nothing is fetched) writes the wheel
itself once the gate file exists; while it waits it records its PID
(``<dir>/building.<pid>``) and exits if its parent (the installer) dies, so a killed
build leaves no process behind.
"""

from __future__ import annotations

from pathlib import Path

_BACKEND = '''
import base64, hashlib, os, sys, time, zipfile

GATE = {gate!r}
NAME, VERSION = "gatedpkg", "0.1"
INFO = NAME + "-" + VERSION + ".dist-info"
FILES = {{
    NAME + "/__init__.py": "VALUE = 42\\n",
    INFO + "/METADATA": "Metadata-Version: 2.1\\nName: " + NAME + "\\nVersion: " + VERSION + "\\n",
    INFO + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: gated\\nRoot-Is-Purelib: true\\n"
                     "Tag: py3-none-any\\n",
}}


def get_requires_for_build_wheel(config_settings=None):
    return []


def _wait_for_gate():
    parent = os.getppid()
    mark = os.path.join(os.path.dirname(GATE), "building." + str(os.getpid()))
    open(mark, "w").close()
    while not os.path.exists(GATE):
        if os.getppid() != parent:
            sys.exit(1)  # the installer died: so does its build
        time.sleep(0.05)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _wait_for_gate()
    name = NAME + "-" + VERSION + "-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as whl:
        for path, text in FILES.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(path + ",sha256=" + digest.decode() + "," + str(len(data)))
            whl.writestr(path, data)
        record.append(INFO + "/RECORD,,")
        whl.writestr(INFO + "/RECORD", "\\n".join(record) + "\\n")
    return name
'''


def gated_package(root: Path) -> tuple[str, Path]:
    """Make the package under ``root``: its requirement line and its gate file (create the
    gate to let its build finish)."""
    pkg = root / "gatedpkg"
    pkg.mkdir(parents=True)
    gate = root / "gate"
    (pkg / "gated_backend.py").write_text(_BACKEND.format(gate=str(gate)))
    (pkg / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "gated_backend"\nbackend-path = ["."]\n'
        '\n[project]\nname = "gatedpkg"\nversion = "0.1"\n')
    return f"gatedpkg @ {pkg.as_uri()}", gate


def builders(root: Path) -> list[int]:
    """PIDs of the package's builds that started (alive or not)."""
    return [int(p.name.split(".")[1]) for p in root.glob("building.*")]
