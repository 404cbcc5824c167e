"""eval.slurm as SlurmOptions, the sbatch command line made from it, and what the client
says when Slurm is missing or its controller does not answer. No cluster needed."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from ports import free_port
from pydantic import ValidationError

from evaltui.contract.slurmoptions import SlurmOptions, slurm_time_seconds
from evaltui.slurm.commands import (
    CLIENT_COMMANDS,
    SlurmUnavailable,
    check_controller,
    require_commands,
)
from evaltui.slurm.submit import DEFAULT_SIGNAL, BatchJob, sbatch_argv, submit


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 5400), ("5:30", 330), ("1:30:00", 5400), ("2-0", 172800), ("1-2:30", 95400),
    ("1-00:00:10", 86410), ("UNLIMITED", None), ("infinite", None)])
def test_slurm_time_formats(text: str, seconds: int | None) -> None:
    assert slurm_time_seconds(text) == seconds
    assert SlurmOptions(time=text).time_limit_seconds() == seconds


@pytest.mark.parametrize(("field", "value", "message"), [
    ("time", "1h", "'1h' is not a Slurm time"),
    ("time", "1:2:3:4", "is not a Slurm time"),
    ("gres", "gpu:a100:2:3", "'gpu:a100:2:3' is not a gres"),
    ("gres", "gpu:1,", "'' is not a gres"),
    ("extra_args", ["--constraint=v100", "script.sh"], "'script.sh' is not an sbatch option"),
    ("cpus_per_worker", 0, "greater than or equal to 1"),
    ("mem_per_worker_mb", 0, "greater than or equal to 1"),
    ("partitions", "gpu", "Extra inputs are not permitted"),
])
def test_bad_options_say_which_and_why(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as err:
        SlurmOptions(**{field: value})
    assert err.value.errors()[0]["loc"][0] == field


def test_good_gres_forms() -> None:
    assert SlurmOptions(gres="gpu:a100:2,shard:4").gres == "gpu:a100:2,shard:4"
    assert SlurmOptions(gres="gpu").gres == "gpu"


def test_time_shorter_than_an_episode_warns() -> None:
    warning = SlurmOptions(time="0:30").short_time_warning(episode_s=45)
    assert warning == ("eval.slurm.time: 0:30 (30 s) is shorter than one episode's expected "
                       "45 s; no episode could finish within it")
    assert SlurmOptions(time="5").short_time_warning(episode_s=45) is None
    assert SlurmOptions().short_time_warning(episode_s=45) is None


def test_sbatch_argv_carries_every_option_then_extra_args_then_the_command() -> None:
    options = SlurmOptions(partition="gpu", account="lab", qos="high", time="1:00:00",
                           cpus_per_worker=3, mem_per_worker_mb=1000, gres="gpu:1",
                           extra_args=["--constraint=v100"])
    job = BatchJob(command=["evaltui", "run", "outputs/eval_runs/r 1"], job_name="evt-r1",
                   output=Path("/runs/r1/slurm-%j.out"), tasks=4, array="0-5%2",
                   chdir=Path("/runs"))
    assert sbatch_argv(options, job) == [
        "sbatch", "--parsable", "--job-name=evt-r1", "--output=/runs/r1/slurm-%j.out",
        "--open-mode=append", "--ntasks=4", "--cpus-per-task=3", "--partition=gpu",
        "--account=lab", "--qos=high", "--time=1:00:00", "--gres=gpu:1", "--array=0-5%2",
        f"--signal={DEFAULT_SIGNAL}", "--mem-per-cpu=334", "--requeue", "--no-kill",
        "--chdir=/runs", "--constraint=v100", "--wrap=exec evaltui run 'outputs/eval_runs/r 1'"]


def test_sbatch_argv_leaves_unset_options_to_the_cluster() -> None:
    job = BatchJob(command=["true"], job_name="j", output=Path("o"), requeue=False,
                   signal=None, no_kill=False)
    assert sbatch_argv(SlurmOptions(), job, test_only=True) == [
        "sbatch", "--test-only", "--job-name=j", "--output=o", "--open-mode=append",
        "--ntasks=1", "--cpus-per-task=1", "--no-requeue", "--wrap=exec true"]


def test_without_slurm_one_line_names_what_is_missing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SlurmUnavailable) as err:
        check_controller()
    assert str(err.value) == ("Slurm is not available here: sinfo not found on PATH (run "
                              "from a Slurm login node, or install Slurm's client commands)")
    with pytest.raises(SlurmUnavailable, match="^Slurm is not available here: sbatch not "):
        submit(SlurmOptions(), BatchJob(command=["true"], job_name="j", output=tmp_path / "o"))
    with pytest.raises(SlurmUnavailable, match=", ".join(CLIENT_COMMANDS) + " not found"):
        require_commands()


needs_sinfo = pytest.mark.skipif(shutil.which("sinfo") is None,
                                 reason="sinfo not installed (apt-get install slurm-wlm)")


@needs_sinfo
def test_controller_that_does_not_answer_is_one_line(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=gone\nSlurmctldHost=localhost(127.0.0.1)\n"
                    f"SlurmctldPort={free_port()}\nAuthType=auth/none\nMessageTimeout=2\n"
                    "NodeName=n1 NodeAddr=127.0.0.1 CPUs=1\nPartitionName=p Nodes=n1\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    with pytest.raises(SlurmUnavailable) as err:
        check_controller()
    assert str(err.value) == ("Slurm's controller does not answer (sinfo: Unable to contact "
                              "slurm controller (connect failure))")


@needs_sinfo
def test_missing_configuration_is_reported_not_waited_on(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A client without its slurm.conf retries for 60 s: the check gives up at its own
    timeout and says why."""
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    start = time.monotonic()
    with pytest.raises(SlurmUnavailable) as err:
        check_controller(timeout=2)
    assert time.monotonic() - start < 10
    assert str(err.value).startswith("sinfo did not answer within 2 s (s_p_parse_file: "
                                     f"cannot stat file {tmp_path / 'absent.conf'}")
