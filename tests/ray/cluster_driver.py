"""A cluster scheduler in its own process (``evaltui serve --ray`` without the HTTP API).

    python cluster_driver.py ADDRESS JOBS.json

JOBS.json: ``[{"vram": MiB, "exclusive": bool, "hold": sec}, ...]``. Submits them to a
JobScheduler whose GPUs are the cluster's (ClusterProbe); each run is a shell process
holding ``hold`` seconds (admission is what is tested; test_cluster_run.py runs real
eval runs). When all ended, prints one JSON line: {"runs": {id: {state, node, gpu}},
"audit": the cluster ledger's audit list}. Outputs and state dir: EVALTUI_OUTPUTS /
EVALTUI_STATE_DIR.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scheduler"))
sys.path.insert(0, str(HERE.parent))  # shared test helpers the scheduler's import

from schedhelpers import line_spec, write_dataset  # noqa: E402

from evaltui.rundir.jsonfiles import read_json  # noqa: E402
from evaltui.rundir.layout import runs_root  # noqa: E402
from evaltui.scheduler.cluster.probe import ClusterProbe  # noqa: E402
from evaltui.scheduler.scheduler import JobScheduler  # noqa: E402

HOLD = """
sleep "$1"
printf '{"status": "done"}' > summary.json
touch _DONE
"""


def main(address: str, jobs_path: str) -> None:
    jobs = json.loads(Path(jobs_path).read_text())
    holds: dict[str, float] = {}

    def spawn(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        # What the run would pin its actors to, kept for the test to check.
        (run_dir / "placed.json").write_text(json.dumps(
            {k: env.get(k) for k in ("EVALTUI_RAY_NODE_ID", "EVALTUI_RAY_GPU", "RAY_ADDRESS")}))
        return subprocess.Popen(["sh", "-c", HOLD, "sh", str(holds[run_dir.name])],
                                cwd=run_dir, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)

    probe = ClusterProbe(address)
    scheduler = JobScheduler(gpu_probe=probe, spawner=spawn, host_shared=False,
                             tick_interval=0.1, probe_interval=0.1).start()
    dataset = write_dataset(Path(jobs_path).with_suffix(".jsonl"), [3])
    ids = []
    for i, job in enumerate(jobs):
        # Distinct params: never calibrated, so each reserves what it declares.
        spec = line_spec(dataset, episodes=1, marginal_vram_mb=job["vram"],
                         exclusive=job.get("exclusive", False), sleep_sec=1000 + i)
        run_id, _ = scheduler.submit(spec)
        holds[run_id] = job.get("hold", 1.0)
        ids.append(run_id)
    runs = {}
    for run_id in ids:
        state = scheduler.wait(run_id, timeout=180).value
        run_dir = runs_root(scheduler.outputs) / run_id
        record = read_json(run_dir / "scheduler.json")
        placed = read_json(run_dir / "placed.json") if (run_dir / "placed.json").exists() else {}
        runs[run_id] = {"state": state, "node": record.get("node"), "gpu": record.get("gpu"),
                        "placed": placed}
    import time

    import ray

    # Ended runs are released at the scheduler's next ticks (not left to the lease).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
            r["scheduler"] == probe.scheduler_id
            for r in ray.get(probe.ledger.entries.remote())):
        time.sleep(0.1)
    audit = ray.get(probe.ledger.audit.remote())
    scheduler.stop()
    print(json.dumps({"runs": runs, "audit": audit}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
