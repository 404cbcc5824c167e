"""Running Slurm's client commands: whether they exist, and their errors as one line."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence

CLIENT_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "srun", "sinfo")
COMMAND_TIMEOUT_S = 60.0
"""A controller that does not answer within this is reported, not waited on forever."""

# what Slurm puts before the words that say what went wrong
_PREFIXES = re.compile(r"^(?:\w+: error: |error: |s(?:batch|run|alloc|queue|cancel|info): |"
                       r"allocation failure: |"
                       r"Batch job submission failed: |slurm_load_\w+(?: error)?: )+")


class SlurmError(RuntimeError):
    """A Slurm command failed; the message is one line naming what and why."""


class SlurmUnavailable(SlurmError):
    """Slurm's commands are not installed here, or its controller does not answer."""


def missing_commands(commands: Sequence[str] = CLIENT_COMMANDS) -> list[str]:
    """The commands of ``commands`` not found on PATH."""
    return [cmd for cmd in commands if shutil.which(cmd) is None]


def require_commands(commands: Sequence[str] = CLIENT_COMMANDS) -> None:
    """SlurmUnavailable naming every missing command, if any is missing."""
    if missing := missing_commands(commands):
        raise SlurmUnavailable(
            f"Slurm is not available here: {', '.join(missing)} not found on PATH "
            "(run from a Slurm login node, or install Slurm's client commands)")


def error_line(stderr: str) -> str:
    """The first line of Slurm's stderr that says something, without its prefixes
    (``sbatch: error: Batch job submission failed: ``): the most specific one, as Slurm
    prints the cause before the summary."""
    for line in stderr.splitlines():
        if text := _PREFIXES.sub("", line.strip()).strip():
            return text
    return "no message"


def run_slurm(argv: Sequence[str], timeout: float = COMMAND_TIMEOUT_S,
              check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one Slurm client command; with ``check``, SlurmError (one line) when it exits
    non-zero, SlurmUnavailable when it is missing or its controller does not answer."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        require_commands([argv[0]])
        raise
    except subprocess.TimeoutExpired as exc:
        # a client without its slurm.conf retries for 60 s, saying why on stderr first
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else \
            (exc.stderr or "")
        why = f" ({error_line(said)})" if said.strip() else ""
        raise SlurmUnavailable(f"{argv[0]} did not answer within {timeout:g} s{why}") from None
    if check:
        raise_for_exit(done)
    return done


def raise_for_exit(done: subprocess.CompletedProcess[str]) -> None:
    """SlurmError (one line, Slurm's own words) if the command exited non-zero;
    SlurmUnavailable if that is because its controller does not answer."""
    if done.returncode == 0:
        return
    name = str(done.args[0])
    line = error_line(done.stderr or done.stdout)
    if "Unable to contact slurm controller" in line:
        raise SlurmUnavailable(f"Slurm's controller does not answer ({name}: {line})")
    raise SlurmError(f"{name}: {line}")


def check_controller(timeout: float = 15.0) -> list[str]:
    """The partitions Slurm's controller reports; SlurmUnavailable (one line) when the
    commands are missing, the configuration is, or the controller does not answer."""
    require_commands(["sinfo"])
    done = run_slurm(["sinfo", "--noheader", "--format=%R"], timeout=timeout)
    return sorted(set(done.stdout.split()))
