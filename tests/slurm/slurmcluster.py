"""A private two-node Slurm cluster on this one machine, for the ``slurm`` tests.

Everything lives in one temp dir and talks only over 127.0.0.1: a munged with its own key
and socket, a slurmctld and two slurmd (``-N n1``, ``-N n2``: two nodes on one host, each
with its own port, spool, pid and log file through ``%n``), three free ports picked at
start. Each node has 4 CPUs, 4 GB and two fake GPUs: gres ``File=`` entries are character
devices the cluster makes (with /dev/null's numbers, so opening one is harmless; slurmd
refuses plain files, and then sets no CUDA_VISIBLE_DEVICES).

Short timers so that the tests see things fast (measured here): a killed slurmd's node
reads ``not responding`` after about 2-3 ``MessageTimeout`` (the ping's retries; ~6 s at
2 s, ~9 s at 5 s) and ``down`` one ping later (``SlurmdTimeout``); a requeued job may start
again ``cred_expire`` + 1 s after the requeue (``REQUEUE_DELAY_S``; Slurm's default is
120 s) and does, because the scheduler looks every second (default 60 s). A shorter
MessageTimeout would make a loaded machine's step launches time out.

The daemons run in the foreground as children of the test process (``-D``/``-F``), so
their PIDs are known; stop() cancels every job, ends each daemon by its PID, then kills by
PID any process still carrying this cluster's ``SLURM_CONF`` in its environment (job
steps outlive a stopped slurmd). Needs root (slurmd launches jobs as their user).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ports import free_port

NODES = ("n1", "n2")
CPUS_PER_NODE = 4
MEMORY_MB_PER_NODE = 4096
GPUS_PER_NODE = 2
SLURMD_TIMEOUT_S = 3
MESSAGE_TIMEOUT_S = 3
REQUEUE_DELAY_S = 5
PARTITION = "main"
PR_SET_PDEATHSIG = 1
NEEDED = ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "srun", "sbatch", "squeue",
          "scontrol", "scancel")


def why_not_available() -> str | None:
    """One line saying why the cluster cannot start here, or None."""
    missing = [cmd for cmd in NEEDED if shutil.which(cmd) is None]
    if missing:
        return ("Slurm test cluster needs slurm-wlm and munge (apt-get install slurm-wlm "
                f"munge): {', '.join(missing)} not found")
    if os.geteuid() != 0:
        return "Slurm test cluster needs root (slurmd starts jobs as their user)"
    return None


def _cmd_env(conf: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = str(conf)
    return env


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    munge_socket: Path
    ports: dict[str, int]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The environment a Slurm client command needs to reach this cluster."""
        return _cmd_env(self.conf)

    def run(self, *argv: str, check: bool = True, timeout: float = 30
            ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env(),
                              timeout=timeout, cwd=self.root)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: "
                                 f"{done.stderr.strip()}")
        return done

    def node_states(self) -> dict[str, str]:
        """node -> its long state as sinfo prints it (``idle``, ``down*``, ``mixed``, ...)."""
        done = self.run("sinfo", "--noheader", "--Node", "--format=%N %T", check=False)
        states = {}
        for line in done.stdout.splitlines():
            name, _, state = line.partition(" ")
            states[name] = state.strip()
        return states

    def wait_nodes(self, want: str, nodes: tuple[str, ...] = NODES, timeout: float = 20
                   ) -> float:
        """Seconds until every node of ``nodes`` reads ``want``; AssertionError at the deadline
        naming what sinfo said last."""
        start = time.monotonic()
        states: dict[str, str] = {}
        while time.monotonic() < start + timeout:
            states = self.node_states()
            if all(states.get(n) == want for n in nodes):
                return time.monotonic() - start
            time.sleep(0.05)
        raise AssertionError(f"after {timeout} s nodes are {states}, wanted {want}")

    def start_node(self, name: str) -> None:
        self._start(name, ["slurmd", "-D", "-N", name])

    def kill_node(self, name: str) -> int:
        """SIGKILL node ``name``'s slurmd (by its PID): a lost node. Returns the PID."""
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait(10)
        return proc.pid

    def lose_node(self, name: str) -> list[int]:
        """Node ``name`` dies: its slurmd, and every job step on it with its processes,
        SIGKILLed by PID (killing slurmd alone leaves its steps running: on one host they
        are not on another machine). Returns the PIDs killed."""
        listed = self.run("squeue", "--steps", "--noheader", "--format=%i|%N").stdout
        steps = {f"slurmstepd: [{sid}]" for sid, _, nodes in
                 (ln.partition("|") for ln in listed.split()) if nodes == name}
        killed = [self.kill_node(name)]
        for pid in self.leftovers():
            if _cmdline(pid) in steps or _environ(pid).get("SLURMD_NODENAME") == name:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
        return killed

    def _start(self, key: str, argv: list[str]) -> None:
        log = open(self.root / f"{key}.out", "ab")  # noqa: SIM115 (the daemon owns it)
        with log:
            self.procs[key] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, env=self.env(),
                                               cwd=self.root, start_new_session=True,
                                               preexec_fn=_die_with_parent)

    def stop(self) -> None:
        if "slurmctld" in self.procs:
            self.run("scancel", f"--partition={PARTITION}", check=False)
            try:
                _wait(lambda: not self.run("squeue", "--noheader", check=False).stdout.strip(),
                      10)
            except TimeoutError:
                pass
        for key in [*NODES, "slurmctld", "munged"]:
            proc = self.procs.pop(key, None)
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def leftovers(self) -> list[int]:
        """PIDs of the processes still carrying this cluster's SLURM_CONF (job steps,
        their children)."""
        mark = f"SLURM_CONF={self.conf}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if mark in fh.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found


@contextmanager
def allocation(cluster: SlurmCluster, monkeypatch: Any, *, per_node: int = 2) -> Iterator[str]:
    """An allocation of ``per_node`` tasks on each node (``salloc --no-shell``) that this
    test's environment, and so its run processes, are inside (``SLURM_JOB_ID``, the
    workers dialling back on 127.0.0.1): a run's worker steps land on both nodes. Yields
    the job id; cancelled at the end, waiting until Slurm has ended it."""
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    monkeypatch.setenv("EVALTUI_SLURM_LISTEN_HOST", "127.0.0.1")
    done = cluster.run("salloc", "--no-shell", f"-N{len(NODES)}",
                       f"--ntasks-per-node={per_node}", "--no-kill", "--job-name=evaltui-test")
    found = re.search(r"Granted job allocation (\d+)", done.stderr)
    assert found is not None, done.stderr
    job = found.group(1)
    monkeypatch.setenv("SLURM_JOB_ID", job)
    try:
        yield job
    finally:
        cluster.run("scancel", job, check=False)
        _wait(lambda: not cluster.run("squeue", "--noheader", f"--jobs={job}",
                                      check=False).stdout.strip(), 30)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            pairs = [item.partition(b"=") for item in fh.read().split(b"\0") if item]
    except OSError:
        return {}
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def _die_with_parent() -> None:
    """In the daemon before exec: SIGKILL it if the test process dies without running
    stop() (SIGKILLed itself). A last resort, not the cleanup: the job steps a slurmd
    started are not its children and would still outlive it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _wait(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.05)


def _slurm_conf(root: Path, host: str, ports: dict[str, int], munge_socket: Path) -> str:
    nodes = "\n".join(
        f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={ports[n]} "
        f"CPUs={CPUS_PER_NODE} RealMemory={MEMORY_MB_PER_NODE} Gres=gpu:{GPUS_PER_NODE} "
        "State=UNKNOWN" for n in NODES)
    return f"""\
ClusterName=evaltuitest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports['slurmctld']}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also how long a requeued job waits before it may start again
AuthInfo=socket={munge_socket},cred_expire={REQUEUE_DELAY_S}
# bind to 127.0.0.1 (what the host and NodeAddr resolve to), not to every address
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
# look at pending jobs every second (default 60 s): a requeued job starts as soon as it may
SchedulerParameters=sched_interval=1,bf_interval=1
GresTypes=gpu
# two nodes share this host's CPUs and memory: take the node lines as they are
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout={SLURMD_TIMEOUT_S}
SlurmctldTimeout=10
MessageTimeout={MESSAGE_TIMEOUT_S}
TCPTimeout=2
KillWait=1
InactiveLimit=0
MinJobAge=300
StateSaveLocation={root}/state
SlurmctldPidFile={root}/slurmctld.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdSpoolDir={root}/%n/spool
SlurmdPidFile={root}/%n/slurmd.pid
SlurmdLogFile={root}/%n/slurmd.log
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
{nodes}
PartitionName={PARTITION} Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


def _gres_conf(root: Path) -> str:
    last = GPUS_PER_NODE - 1
    return "AutoDetect=off\n" + "".join(
        f"NodeName={n} Name=gpu File={root}/{n}/gpu[0-{last}]\n" for n in NODES)


def _make_dirs(root: Path) -> Path:
    """The munge dirs munged accepts (key dir private, socket dir world-searchable), each
    node's spool and fake GPU devices; returns the munge socket path."""
    munge = root / "munge"
    munge.mkdir(mode=0o700)
    munge.chmod(0o711)
    (munge / "run").mkdir(mode=0o755)
    (root / "state").mkdir()
    null = os.stat("/dev/null").st_rdev
    for n in NODES:
        (root / n / "spool").mkdir(parents=True)
        for i in range(GPUS_PER_NODE):
            os.mknod(root / n / f"gpu{i}", 0o666 | stat.S_IFCHR, null)
    return munge / "run" / "socket"


@contextmanager
def two_node_cluster() -> Iterator[SlurmCluster]:
    """Start the cluster of the module docstring, wait for both nodes ``idle``; stop it
    (everything, by PID) on exit, however the block ends."""
    root = Path(tempfile.mkdtemp(prefix="evt-slurm-", dir="/tmp"))
    root.chmod(0o755)  # jobs run as root here, but munged checks every parent dir
    host = socket.gethostname().split(".")[0]
    ports = {key: free_port() for key in ("slurmctld", *NODES)}
    munge_socket = _make_dirs(root)
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, host, ports, munge_socket))
    (root / "gres.conf").write_text(_gres_conf(root))
    cluster = SlurmCluster(root, conf, munge_socket, ports)
    key = root / "munge" / "munge.key"
    try:
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True,
                       capture_output=True, timeout=30)
        m = root / "munge"
        cluster._start("munged", ["munged", "-F", f"--socket={munge_socket}",
                                  f"--key-file={key}", f"--pid-file={m}/run/munged.pid",
                                  f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"])
        _wait(munge_socket.exists, 10)
        cluster._start("slurmctld", ["slurmctld", "-D"])
        for n in NODES:
            cluster.start_node(n)
        cluster.wait_nodes("idle", timeout=30)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
