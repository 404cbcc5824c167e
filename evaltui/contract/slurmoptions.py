"""``eval.slurm`` (DESIGN §12): what a run asks of Slurm, as a typed model.

Part of the contract (spec.py carries it as ``EvalSection.slurm``), so it depends on
nothing above pydantic; the Slurm client (:mod:`evaltui.slurm`) reads it. ``time`` is
checked here in Slurm's own formats and kept as given (sbatch reads it);
:func:`slurm_time_seconds` reads it.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_TIME = re.compile(r"^(?:(?P<d>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                   r"|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$")
_UNLIMITED = ("UNLIMITED", "INFINITE")
_GRES = re.compile(r"^[A-Za-z][\w.-]*(?::[\w.-]+)?(?::\d+)?$")


def slurm_time_seconds(text: str) -> int | None:
    """Seconds in a Slurm time limit (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``,
    ``D-HH:MM``, ``D-HH:MM:SS``, as sbatch reads them and squeue/scontrol print them);
    None for ``UNLIMITED``/``INFINITE``. ValueError on anything else."""
    if text.upper() in _UNLIMITED:
        return None
    m = _TIME.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a Slurm time (MM, MM:SS, HH:MM:SS, D-HH, "
                         "D-HH:MM or D-HH:MM:SS)")
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "d" in g:
        return ((g["d"] * 24 + g["dh"]) * 60 + g.get("dm", 0)) * 60 + g.get("ds", 0)
    if "c" in g:  # HH:MM:SS
        return (g["a"] * 60 + g["b"]) * 60 + g["c"]
    return g["a"] * 60 + g.get("b", 0)  # MM or MM:SS


class SlurmOptions(BaseModel):
    """How a run is submitted to Slurm (``eval.slurm``). Unset fields are left to the
    cluster's defaults (its default partition, the user's default account, ...)."""

    model_config = ConfigDict(extra="forbid")

    partition: str | None = None
    """``--partition``; default: the cluster's default partition."""
    account: str | None = None
    """``--account`` charged for the job."""
    qos: str | None = None
    """``--qos``."""
    time: str | None = None
    """``--time``, the job's wall-clock limit in Slurm's formats (``90``, ``1:30:00``,
    ``2-00:00:00``); default: the partition's."""
    cpus_per_worker: int = Field(default=1, ge=1, le=1024)
    """CPUs of each worker's task (``--cpus-per-task``)."""
    mem_per_worker_mb: int | None = Field(default=None, ge=1)
    """Memory of each worker's task in MB (``--mem-per-cpu`` = this / cpus_per_worker,
    rounded up); default: the cluster's ``DefMemPerCPU``."""
    gres: str | None = None
    """``--gres`` of the job, for the shared nodesets' GPUs (``gpu:1``, ``gpu:a100:2``,
    comma-separated for several)."""
    extra_args: list[str] = Field(default_factory=list)
    """More sbatch options, passed as given after evaltui's own (``--constraint=v100``)."""

    @field_validator("time")
    @classmethod
    def _time_is_slurm_time(cls, value: str | None) -> str | None:
        if value is not None:
            slurm_time_seconds(value)
        return value

    @field_validator("gres")
    @classmethod
    def _gres_is_gres(cls, value: str | None) -> str | None:
        if value is not None:
            for item in value.split(","):
                if not _GRES.match(item):
                    raise ValueError(f"{item!r} is not a gres (NAME[:TYPE][:COUNT], "
                                     "e.g. gpu:1)")
        return value

    @field_validator("extra_args")
    @classmethod
    def _extra_args_are_options(cls, value: list[str]) -> list[str]:
        for arg in value:
            # a bare word would become sbatch's script argument in place of evaltui's
            if not arg.startswith("-"):
                raise ValueError(f"{arg!r} is not an sbatch option (write --name=value)")
        return value

    def time_limit_seconds(self) -> int | None:
        """The job's time limit in seconds; None when unset or unlimited."""
        return None if self.time is None else slurm_time_seconds(self.time)

    def short_time_warning(self, episode_s: float, basis: str | None = None,
                           signal_before_s: int = 0) -> str | None:
        """A warning when the time limit cannot fit one episode of ``episode_s`` seconds
        (the run would be killed, requeued and killed again, never finishing one).
        ``signal_before_s``: the run is told to stop that long before the limit (its
        USR1); ``basis``: where ``episode_s`` comes from, said in the warning."""
        limit = self.time_limit_seconds()
        if limit is None or limit - signal_before_s >= episode_s:
            return None
        usable = f"; the run is told to stop {signal_before_s} s before it" \
            if signal_before_s else ""
        why = f" ({basis})" if basis else ""
        return (f"eval.slurm.time: {self.time} ({limit} s{usable}) is shorter than one "
                f"episode's expected {episode_s:.0f} s{why}; no episode could finish "
                "within it")
