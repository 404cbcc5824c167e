"""What the Ray executor's actors ask of the cluster, and the error when nothing fits.

Ray's GPUs are logical (a node says how many it has, nothing says how full they are), so
a shared nodeset that needs GPU memory asks for a GPU *and* a ``vram_mb`` custom
resource: GPU nodes are started with ``--num-gpus N --resources '{"vram_mb": M}'`` (M the
MiB their GPUs hold), and Ray then never puts more declared VRAM on a node than it has.

The VRAM a nodeset asks is the run's declared ``scheduling.marginal_vram_mb`` (what the
scheduler admits an uncalibrated run by), split evenly over the shared nodesets the
executor hosts: replicated nodesets are simulators in the worker actors, and those ask
for CPUs only. A run pinned to a node by a cluster scheduler (``node_placement``) had
its memory reserved there already and asks for nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from evaltui.contract.settings import settings
from evaltui.engine.executor.errors import ExecutorError
from evaltui.engine.graph.specchecks import CheckedSpec
from evaltui.gpu.fakegpu import FAKE_GPU_INDEX_ENV

PLACE_TIMEOUT_SEC = 60.0
"""How long an actor may wait for the cluster to have room (``EVALTUI_RAY_PLACE_TIMEOUT_SEC``)."""
VRAM_RESOURCE = "vram_mb"
GPU_SHARE = 0.001
"""``num_gpus`` of a GPU nodeset: enough for Ray to place it on a GPU node and set its
CUDA_VISIBLE_DEVICES, small enough that VRAM (``vram_mb``), not a GPU count, is what
limits how many nodesets share one GPU."""


def place_timeout_sec() -> float:
    return settings().ray_place_timeout_sec or PLACE_TIMEOUT_SEC


def host_resources(checked: CheckedSpec, hosted: Sequence[str], pinned: bool
                   ) -> dict[str, dict[str, Any]]:
    """Actor resource options of each hosted shared nodeset (see the module docstring)."""
    declared = checked.spec.scheduling.marginal_vram_mb
    if pinned or not hosted or declared <= 0:
        return {name: {"num_cpus": 0} for name in hosted}
    share = -(-declared // len(hosted))  # rounded up: never ask less than declared
    return {name: {"num_cpus": 0, "num_gpus": GPU_SHARE, "resources": {VRAM_RESOURCE: share}}
            for name in hosted}


def asked_text(options: Mapping[str, Any]) -> str:
    """``{'CPU': 1, 'GPU': 0.001, 'vram_mb': 6000}``: an actor's ask in Ray's own names."""
    asked = {"CPU": options.get("num_cpus", 1)}
    if options.get("num_gpus"):
        asked["GPU"] = options["num_gpus"]
    asked.update(options.get("resources") or {})
    return str({k: v for k, v in asked.items() if v})


def unplaceable(what: str, options: Mapping[str, Any], timeout: float) -> ExecutorError:
    """The run error for an actor no node could take within ``timeout``."""
    # optional: ray (the ray extra)
    import ray

    total = ray.cluster_resources()
    asked = {"CPU": options.get("num_cpus", 1), "GPU": options.get("num_gpus", 0),
             **(options.get("resources") or {})}
    missing = [f"{key} {value} (largest node has {_largest(key)}, cluster total "
               f"{total.get(key, 0):g})" for key, value in asked.items()
               if value and _largest(key) < value]
    why = ("missing resources: " + "; ".join(missing)) if missing else \
        f"missing resources: none free now of {asked_text(options)} (cluster: {total})"
    return ExecutorError(f"cannot place {what} on the Ray cluster within {timeout:g} s: "
                         f"it asks {asked_text(options)}; {why}")


def _largest(key: str) -> float:
    """The most of resource ``key`` any one alive node has (0 if none declares it)."""
    # optional: ray (the ray extra)
    import ray

    return max((node["Resources"].get(key, 0) for node in ray.nodes() if node["Alive"]),
               default=0)


NODE_ID_ENV = "EVALTUI_RAY_NODE_ID"
"""Set by a cluster scheduler on a run it placed: the Ray node its actors are pinned to."""
NODE_GPU_ENV = "EVALTUI_RAY_GPU"
"""Set with NODE_ID_ENV: the GPU index on that node (its actors' CUDA_VISIBLE_DEVICES)."""
RUN_ID_ENV = "EVALTUI_RAY_RUN_ID"
"""Set with NODE_ID_ENV: the run's id in the cluster ledger, where a run whose node left
the cluster finds the node its scheduler moved it to (ray_placement.py)."""
REPLICA_GPUS_ENV = "EVALTUI_RAY_REPLICA_GPUS"
"""Set with NODE_ID_ENV on a run with replicas: JSON ``[[node id, GPU, node name], ...]``,
every node GPU its scheduler reserved for it, one replica actor on each (the first is
NODE_ID_ENV/NODE_GPU_ENV)."""
LEDGER_NAME = "evaltui-ledger"
LEDGER_NAMESPACE = "evaltui"
"""The cluster ledger actor (scheduler/cluster/ledger.py), by name and namespace."""


def node_placement(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Actor options: SPREAD, or pinned to the node a cluster scheduler chose for this run.

    ``evaltui serve --ray`` admits a run onto one GPU of one node and says which in the
    run's environment (``EVALTUI_RAY_NODE_ID``, ``EVALTUI_RAY_GPU``; scheduler/cluster.py).
    The actors then go to that node only (hard affinity: its memory was reserved there)
    and see that GPU alone.
    """
    env = os.environ if env is None else env  # set per run by its scheduler, not a setting
    node_id, gpu = env.get(NODE_ID_ENV), env.get(NODE_GPU_ENV, "")
    if not node_id or not gpu.isdigit():
        return {"scheduling_strategy": "SPREAD"}
    return pinned_to(node_id, int(gpu), env.get(RUN_ID_ENV))


def pinned_to(node_id: str, gpu: int, run_id: str | None) -> dict[str, Any]:
    """Actor options: on node ``node_id`` only, seeing its GPU ``gpu`` alone, with the
    run's id in their environment (the node's probe attributes their GPU memory by it)."""
    # optional: ray (the ray extra)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


    env = {"CUDA_VISIBLE_DEVICES": str(gpu), FAKE_GPU_INDEX_ENV: str(gpu)}
    if run_id:
        env[RUN_ID_ENV] = run_id
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
            "runtime_env": {"env_vars": env}}
