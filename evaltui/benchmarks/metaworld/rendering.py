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
import os, sys, time
os.environ["MUJOCO_GL"] = sys.argv[1]
if sys.argv[1] == "osmesa":
    os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
import mujoco
width, height = int(sys.argv[2]), int(sys.argv[3])
xml = (f"<mujoco><visual><global offwidth='{width}' offheight='{height}'/></visual>"
       "<worldbody><light pos='0 0 3'/><geom size='1'/></worldbody></mujoco>")
m = mujoco.MjModel.from_xml_string(xml)
d = mujoco.MjData(m)
r = mujoco.Renderer(m, height, width)
r.update_scene(d)
assert r.render().shape == (height, width, 3)  # the first frame: the context's set-up
t0 = time.perf_counter()
for _ in range(2):
    r.update_scene(d)
    r.render()
print("ok", (time.perf_counter() - t0) / 2 * 1000)
"""


@dataclass(frozen=True)
class ProbeResult:
    """What :func:`probe_backend` found: whether ``backend`` renders, one line saying so
    (the fix when it does not), and a frame's time in ms once it works."""

    works: bool
    message: str
    backend: str
    frame_ms: float | None = None


def probe_backend(backend: str | None = None, timeout_s: float = PROBE_TIMEOUT_S,
                  width: int = 16, height: int = 16) -> ProbeResult:
    """Render frames of ``width`` x ``height`` with ``backend`` in a subprocess: the first
    (the GL context's set-up), then two timed ones. The scene is one geom (no simulator
    import: the probe stays a few seconds), so the time is the backend's floor at that
    size; a Meta-World scene costs several times more (docs/performance.md)."""
    backend = backend or render_backend()
    where = f"MUJOCO_GL={backend}"
    fix = _FIXES.get(backend, "set MUJOCO_GL=egl or osmesa")
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, backend, str(width), str(height)],
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return ProbeResult(False, f"headless rendering: {where} hung for {timeout_s:.0f} s; "
                           f"{fix}", backend)
    last_out = (proc.stdout.strip().splitlines() or [""])[-1].split()
    if proc.returncode == 0 and last_out[:1] == ["ok"]:
        ms = float(last_out[1])
        return ProbeResult(True, f"headless rendering: {where} works; a {width}x{height} "
                           f"frame of the probe's one-geom scene took {ms:.1f} ms (a task's "
                           "scene costs more)", backend, ms)
    if "No module named 'mujoco'" in proc.stderr:
        return ProbeResult(False, "headless rendering: mujoco is not installed; "
                           "pip install 'evaltui[metaworld]'", backend)
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:160]
    return ProbeResult(False, f"headless rendering: {where} failed ({last}); {fix}", backend)
