"""A scheduler in its own process, for tests that kill it or race several of them.

    python sched_driver.py serve SPECS.json   submit each spec in turn (``"wait_running": true``
                                        waits until that run runs), print the run ids as
                                        one JSON line, then keep scheduling until killed.
    python sched_driver.py race N SEED DATASET
                                        submit N jobs of 2-16 GiB whose runs are tiny shell
                                        processes holding for 10-50 ms, schedule them all,
                                        print {run_id: state} as one JSON line and exit.
    python sched_driver.py mixed N SEED DATASET PORT PROFILES WRAPPERS
                                        serve the API on PORT, submit N exclusive jobs of
                                        random priority and start ``evaltui run`` wrappers
                                        (profiles named in WRAPPERS, comma-separated);
                                        once all wait, print the queue as one JSON line;
                                        when all ended, print {id: state} and exit.
    python sched_driver.py spread N SEED DATASET
                                        like race, on several GPUs: most jobs are runs
                                        with replicas (one per GPU, several GPUs each).
    python sched_driver.py fixed N MB HOLD DATASET
                                        submit N jobs of MB MiB whose runs are shell
                                        processes holding HOLD s, schedule them all, print
                                        {run_id: state} as one JSON line and exit.

The outputs root and state dir come from EVALTUI_OUTPUTS / EVALTUI_STATE_DIR.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from schedhelpers import line_spec  # noqa: E402

from evaltui.api.backend_start import start_backend  # noqa: E402
from evaltui.contract.states import RunState  # noqa: E402
from evaltui.scheduler.scheduler import JobScheduler  # noqa: E402

FAKE_RUN = """
date +%s.%N > started
sleep "$1"
date +%s.%N > ended
printf '{"status": "done"}' > summary.json
touch _DONE
"""


def serve(specs_path: str) -> None:
    # SCHED_DRIVER_HOLD=S: runs are shell processes holding S seconds (no run process).
    hold = os.environ.get("SCHED_DRIVER_HOLD")
    spawner = fake_spawner(random.Random(0), float(hold)) if hold else None
    scheduler = JobScheduler(spawner=spawner, tick_interval=0.05, probe_interval=0.05).start()
    ids = []
    for item in json.loads(Path(specs_path).read_text()):
        run_id, _ = scheduler.submit(item["spec"])
        ids.append(run_id)
        if item.get("wait_running"):
            deadline = time.monotonic() + 30
            while scheduler.get_run(run_id).state is not RunState.RUNNING:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{run_id} never started running")
                time.sleep(0.02)
    print(json.dumps(ids), flush=True)
    while True:
        time.sleep(1)


def fake_spawner(rng: random.Random, hold_sec: float | None = None
                 ) -> Callable[[Path, Mapping[str, str]], subprocess.Popen[bytes]]:
    """Runs that are tiny shell processes holding for 10-50 ms (or ``hold_sec``)."""
    def spawn(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        hold = f"{rng.uniform(0.01, 0.05) if hold_sec is None else hold_sec:.3f}"
        return subprocess.Popen(["sh", "-c", FAKE_RUN, "sh", hold], cwd=run_dir, env=dict(env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    return spawn


def race(n: int, seed: int, dataset: str) -> None:
    rng = random.Random(seed)
    spawn = fake_spawner(rng)
    scheduler = JobScheduler(spawner=spawn, tick_interval=0.01, probe_interval=0.01).start()
    # Distinct params per job: each is a nodeset never calibrated, so it reserves what it
    # declares (the fake runs use no VRAM, and a calibrated 0 would reserve nothing).
    ids = [scheduler.submit(line_spec(Path(dataset), episodes=1,
                                      marginal_vram_mb=rng.randint(2048, 16384),
                                      sleep_sec=seed + i / 1000))[0]
           for i in range(n)]
    states = {run_id: scheduler.wait(run_id, timeout=120).value for run_id in ids}
    scheduler.stop()
    print(json.dumps(states), flush=True)


def fixed(n: int, mb: int, hold_sec: float, dataset: str) -> None:
    """N jobs of ``mb`` MiB each (distinct params: never calibrated, so each reserves
    what it declares), their runs shell processes holding ``hold_sec``."""
    scheduler = JobScheduler(spawner=fake_spawner(random.Random(0), hold_sec),
                             tick_interval=0.01, probe_interval=0.01).start()
    # SCHED_DRIVER_PORT (and _TOKEN): serve the API too, until the runs end.
    port = os.environ.get("SCHED_DRIVER_PORT")
    served = start_backend(scheduler, port=int(port),
                           token=os.environ["SCHED_DRIVER_TOKEN"]) if port else None
    ids = [scheduler.submit(line_spec(Path(dataset), episodes=1, marginal_vram_mb=mb,
                                      sleep_sec=os.getpid() + i / 1000))[0]
           for i in range(n)]
    states = {run_id: scheduler.wait(run_id, timeout=120).value for run_id in ids}
    if served is not None:
        served.stop()
    scheduler.stop()
    print(json.dumps(states), flush=True)


def spread(n: int, seed: int, dataset: str) -> None:
    """N jobs of 4-16 GiB, most of them runs with replicas (per_gpu, or 1-3 replicas with
    min_replicas 1-2), the rest one-GPU jobs; runs are shell processes holding 10-50 ms."""
    rng = random.Random(seed)
    scheduler = JobScheduler(spawner=fake_spawner(rng), tick_interval=0.01,
                             probe_interval=0.01).start()
    ids = []
    for i in range(n):
        spec = line_spec(Path(dataset), episodes=1, marginal_vram_mb=rng.randint(4096, 16384),
                         sleep_sec=seed + i / 1000)
        if rng.random() < 0.75:
            most = rng.choice(["per_gpu", 1, 2, 3])
            least = rng.randint(1, 2 if most == "per_gpu" else min(2, int(most)))
            spec["graph"]["nodesets"]["policy"].update(parallelism="shared", replicas=most,
                                                       min_replicas=least)
        ids.append(scheduler.submit(spec)[0])
    states = {run_id: scheduler.wait(run_id, timeout=120).value for run_id in ids}
    scheduler.stop()
    print(json.dumps(states), flush=True)


def mixed(n: int, seed: int, dataset: str, port: int, profiles: str, names: str) -> None:
    """Eval runs and wrapped commands in one backend (the interactive lock holds all
    admission until the test releases it)."""
    rng = random.Random(seed)
    scheduler = JobScheduler(spawner=fake_spawner(rng), tick_interval=0.02,
                             probe_interval=0.02).start()
    served = start_backend(scheduler, port=port)
    ids = [scheduler.submit(line_spec(Path(dataset), episodes=1, marginal_vram_mb=2048,
                                      exclusive=True, priority=rng.randint(-3, 3),
                                      sleep_sec=seed + i / 1000))[0] for i in range(n)]
    wrappers = []
    for k, name in enumerate(names.split(",")):
        wrappers.append(subprocess.Popen(
            [sys.executable, "-m", "evaltui.cli", "run", "-q", "--ports", str(port),
             "--profiles", profiles, name, "--", "sleep", "0.05"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        while len(scheduler.admits.all()) <= k:  # queued one after the other: known order
            time.sleep(0.02)
    print(json.dumps([[q.run_id, q.kind, q.priority] for q in scheduler.queue()]), flush=True)
    states = {run_id: scheduler.wait(run_id, timeout=120).value for run_id in ids}
    for proc in wrappers:
        states[f"wrapper{proc.pid}"] = str(proc.wait(timeout=120))
    served.stop()
    scheduler.stop()
    print(json.dumps(states), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif sys.argv[1] == "fixed":
        fixed(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "spread":
        spread(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "mixed":
        mixed(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6],
              sys.argv[7])
    else:
        race(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
