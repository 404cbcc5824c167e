"""Every environment variable evaltui reads, in one pydantic-settings class.

No other module reads ``os.environ`` for these: they call :func:`settings`, which
re-reads the environment when any of the variables below changed since the last call
(tests set them per test with ``monkeypatch``; the CLI sets ``EVALTUI_FAKE_GPUS`` for
``evaltui demo``) and otherwise returns the cached instance, so a call costs a few
dict look-ups. Values are kept as the user wrote them (stripped; empty means unset);
the module that owns a variable parses it and words the error, as before.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "EVALTUI_"


class Settings(BaseSettings):
    """evaltui's configuration from the environment (``EVALTUI_*`` plus a few OS conventions)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, case_sensitive=False,
                                      extra="ignore", frozen=True)

    outputs: str | None = None
    """``EVALTUI_OUTPUTS``: the outputs root (run dirs in ``eval_runs/``); default ``outputs``."""
    state_dir: str | None = None
    """``EVALTUI_STATE_DIR``: per-user state (ledger, token, calibration, fake-GPU charges)."""
    config_dir: str | None = None
    """``EVALTUI_CONFIG_DIR``: per-user configuration (user themes in its ``themes/``)."""
    env_cache: str | None = None
    """``EVALTUI_ENV_CACHE``: where nodesets' own environments are built and kept (shared by
    every run, and by users who can write there); default ``~/.cache/evaltui/envs``."""
    fake_gpus: str | None = None
    """``EVALTUI_FAKE_GPUS``: simulated devices, ``NxMiB`` terms (``2x24576``), instead of NVML."""
    fake_gpu_index: str | None = None
    """``EVALTUI_FAKE_GPU_INDEX``: the fake device the scheduler chose for a run."""
    parent_pid: str | None = None
    """``EVALTUI_PARENT_PID``: the backend that spawned a run (for tie-to-backend runs)."""
    port_pool: str | None = None
    """``EVALTUI_PORT_POOL``: ports ``evaltui run`` hands to wrapped commands (``LO-HI``)."""
    token: str | None = None
    """``EVALTUI_TOKEN``: the API bearer token, instead of the one in the state dir."""
    ledger_audit: str | None = None
    """``EVALTUI_LEDGER_AUDIT``: a file the ledger appends every reservation change to."""
    frames: str | None = None
    """``EVALTUI_FRAMES``: ``graphics`` draws frames with terminal graphics (textual-image)."""
    admit_id: str | None = None
    """``EVALTUI_ADMIT_ID``: set by ``evaltui run`` for the wrapped command (its admit entry)."""
    backend_url: str | None = Field(default=None, validation_alias="BACKEND_URL")
    """``BACKEND_URL``: the backend clients talk to; default ``http://127.0.0.1:8000``."""
    xdg_state_home: str | None = Field(default=None, validation_alias="XDG_STATE_HOME")
    """``XDG_STATE_HOME``: base of the state dir when ``EVALTUI_STATE_DIR`` is unset."""
    xdg_config_home: str | None = Field(default=None, validation_alias="XDG_CONFIG_HOME")
    """``XDG_CONFIG_HOME``: base of the config dir when ``EVALTUI_CONFIG_DIR`` is unset."""
    ray_address: str | None = Field(default=None, validation_alias="RAY_ADDRESS")
    """``RAY_ADDRESS``: the Ray cluster of ``executor = "ray"`` runs without a ``ray_address``."""
    ray_place_timeout_sec: float | None = Field(default=None, gt=0)
    """``EVALTUI_RAY_PLACE_TIMEOUT_SEC``: how long a Ray actor may wait for room (60 s)."""
    ledger_dir: str | None = None
    """``EVALTUI_LEDGER_DIR``: the machine-wide reservation ledger's directory (default
    ``/var/lib/evaltui/ledger``, made by ``evaltui ledger setup``); ``per-user`` keeps it
    in the state dir."""
    disk_full_wait_sec: float | None = Field(default=None, ge=0)
    """``EVALTUI_DISK_FULL_WAIT_SEC``: how long a run waits for room on a full disk
    (ENOSPC/EDQUOT) before it ends ``failed`` with "disk full: PATH" (300 s)."""
    poll_files: str | None = None
    """``EVALTUI_POLL_FILES``: ``auto`` (default), ``on`` or ``off``: whether readers of run
    dirs poll instead of using inotify, which does not see other nodes' writes on a network
    filesystem; ``auto`` polls on NFS, CIFS, Lustre, GPFS, ... (:mod:`evaltui.rundir.pollfiles`)."""
    replica_spread: str | None = None
    """``EVALTUI_REPLICA_SPREAD``: how workers spread over a nodeset's replicas, ``slot``
    (worker i on replica i % R) or ``least_loaded`` (per request); default: the faster."""
    cpus: str | None = None
    """``EVALTUI_CPUS``: the CPU cores admission counts on this machine, instead of the
    probe (the cgroup's CPU limit, else the CPUs this process may run on); tests and
    containers set it (:mod:`evaltui.scheduler.admission.cores`)."""
    cpu_oversubscribe: str | None = None
    """``EVALTUI_CPU_OVERSUBSCRIBE``: how many cores' worth of reservations admission lets
    each core carry (default 1.0: no oversubscription)."""
    cuda_visible_devices: str | None = Field(default=None,
                                             validation_alias="CUDA_VISIBLE_DEVICES")
    """``CUDA_VISIBLE_DEVICES``: kept verbatim, since an empty value means "no GPU"."""

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object, info: ValidationInfo) -> object:
        # ``FOO= evaltui …`` is how people unset a variable for one command.
        if isinstance(value, str) and info.field_name != "cuda_visible_devices":
            value = value.strip()
            return value or None
        return value

    def config_root(self) -> Path:
        """The config dir: ``$EVALTUI_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/evaltui``, else
        ``~/.config/evaltui`` (not created: it only holds what the user puts there)."""
        if self.config_dir:
            return Path(self.config_dir).expanduser()
        xdg = self.xdg_config_home
        if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
            return Path(xdg) / "evaltui"
        return Path.home() / ".config" / "evaltui"


def env_names() -> tuple[str, ...]:
    """The environment variable behind each field, in field order."""
    return tuple(field.validation_alias if isinstance(field.validation_alias, str)
                 else ENV_PREFIX + name.upper() for name, field in Settings.model_fields.items())


_ENV_NAMES = env_names()
_lock = threading.Lock()
_cached: tuple[tuple[str | None, ...], Settings] | None = None


def settings() -> Settings:
    """The current settings: rebuilt only if one of :func:`env_names` changed since last call."""
    global _cached
    key = tuple(map(os.environ.get, _ENV_NAMES))
    cached = _cached
    if cached is not None and cached[0] == key:
        return cached[1]
    with _lock:
        fresh = Settings()
        _cached = (key, fresh)
    return fresh


def reset_settings() -> None:
    """Forget the cached instance (the next :func:`settings` call reads the environment)."""
    global _cached
    _cached = None
