"""When frames are taken (``--frames off|every:N|end``) and which GL backend renders them.

:func:`render_backend` picks MuJoCo's headless backend without importing it: ``MUJOCO_GL``
when the user set it, else ``egl`` where an NVIDIA or DRI render device and libEGL are
present, else ``osmesa`` (CPU). :func:`probe_backend` checks that choice for real in a
subprocess with a time limit (a missing library can hang a GL init for minutes:
positronic#617), so the parent never loads GL itself.
"""

from __future__ import annotations

import ctypes.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT_S = 30.0

_FIXES = {
    "osmesa": "install Debian's libosmesa6 (apt-get install -y libosmesa6), or set "
              "MUJOCO_GL=egl on a machine with a GPU",
    "egl": "install libegl1 and the NVIDIA driver's EGL vendor library, and make "
           "MUJOCO_EGL_DEVICE_ID match a device in CUDA_VISIBLE_DEVICES; or set "
           "MUJOCO_GL=osmesa (CPU, with libosmesa6)",
    "glfw": "glfw needs a display; on a headless machine set MUJOCO_GL=egl or osmesa",
}


@dataclass(frozen=True)
class FrameSchedule:
    """``off``, ``every:N`` (reset and every N-th step) or ``end`` (the last step only)."""

    every: int = 0
    end: bool = False

    @classmethod
    def parse(cls, text: str) -> FrameSchedule:
        text = str(text).strip()
        if text == "off":
            return cls()
        if text == "end":
            return cls(end=True)
        match = re.fullmatch(r"every:(\d+)", text)
        if match and int(match.group(1)) >= 1:
            return cls(every=int(match.group(1)))
        raise ValueError(f"frames must be off, end or every:N (N >= 1), got {text!r}")

    @property
    def on(self) -> bool:
        return self.end or self.every > 0

    @property
    def at_reset(self) -> bool:
        return self.every > 0

    def emit(self, step: int, done: bool) -> bool:
        """Whether step ``step`` (1-based) renders a frame."""
        return (self.every > 0 and step % self.every == 0) or (self.end and done)


def render_backend() -> str:
    """The MuJoCo GL backend frames will use (see the module docstring)."""
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    if chosen:
        return chosen
    gpu = Path("/dev/nvidia0").exists() or any(Path("/dev/dri").glob("renderD*"))
    if gpu and ctypes.util.find_library("EGL"):
        return "egl"
    return "osmesa"


_PROBE = """
import os, sys
os.environ["MUJOCO_GL"] = sys.argv[1]
if sys.argv[1] == "osmesa":
    os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
import mujoco
m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>")
r = mujoco.Renderer(m, 16, 16)
r.update_scene(mujoco.MjData(m))
assert r.render().shape == (16, 16, 3)
print("ok")
"""


def probe_backend(backend: str | None = None, timeout_s: float = PROBE_TIMEOUT_S
                  ) -> tuple[bool, str]:
    """Render one 16x16 image with ``backend`` in a subprocess; (works, one-line message)."""
    backend = backend or render_backend()
    where = f"MUJOCO_GL={backend}"
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, backend], capture_output=True,
                              text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False, (f"headless rendering: {where} hung for {timeout_s:.0f} s; "
                       f"{_FIXES.get(backend, 'set MUJOCO_GL=egl or osmesa')}")
    if proc.returncode == 0 and proc.stdout.strip().endswith("ok"):
        return True, f"headless rendering: {where} works"
    if "No module named 'mujoco'" in proc.stderr:
        return False, ("headless rendering: mujoco is not installed; "
                       "pip install 'evaltui[metaworld]'")
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:160]
    return False, (f"headless rendering: {where} failed ({last}); "
                   f"{_FIXES.get(backend, 'set MUJOCO_GL=egl or osmesa')}")
