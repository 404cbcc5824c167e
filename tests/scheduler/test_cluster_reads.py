"""What a scheduler's resource read says of a Ray cluster: each GPU's node,
each node's host RAM, the nodes that left; and nothing of the kind on one machine."""

from __future__ import annotations

import time

from clusterstandin import NODE_A, two_nodes_and_a_lost_one

from evaltui.contract.views import Resources
from evaltui.scheduler.scheduler import JobScheduler


def test_cluster_read_names_each_gpus_node_each_nodes_host_and_the_lost_ones(
        make_scheduler) -> None:
    probe = two_nodes_and_a_lost_one()
    scheduler: JobScheduler = make_scheduler(gpu_probe=probe)
    res = scheduler.resources()
    assert [(g.node, g.index, g.name, g.total_mb, g.used_mb) for g in res.gpus] == [
        ("node-a", 0, "node-a · fake GPU 0", 24576, 9216),
        ("node-a", 1, "node-a · fake GPU 1", 24576, 2048),
        ("node-b", 0, "node-b · fake GPU 0", 24576, 512)]
    # The cluster ledger's reservation on node-a GPU0 (and only there) is set against it;
    # node-a GPU1's 2 GiB that nobody reserved count as a process of someone else.
    assert [(g.reserved_mb, g.available_mb, g.runs) for g in res.gpus] == [
        (4096, 24576 - 9216 - 4096, 1), (0, 24576 - 2048, 1), (0, 24576 - 512, 0)]
    assert probe.entries()[0].node_id == NODE_A
    assert [(n.name, n.ram_total_mb, n.ram_available_mb, n.cpu_count) for n in res.nodes] \
        == [("node-a", 64000, 40000, 16), ("node-b", 128000, 120000, 32)]
    [lost] = res.nodes_lost
    assert lost.name == "node-c"
    # ``since`` is on the backend's clock, like ``taken_at``: the TUI says "gone 12 s ago".
    assert 12.0 <= res.taken_at - lost.since < 13.0
    assert abs(res.taken_at - time.time()) < 60


def test_node_fields_survive_the_api_json_and_an_older_servers_json_parses(
        make_scheduler) -> None:
    res = make_scheduler(gpu_probe=two_nodes_and_a_lost_one()).resources()
    data = res.model_dump(mode="json")
    assert data["gpus"][2]["node"] == "node-b"
    assert data["nodes_lost"][0]["name"] == "node-c"
    assert Resources.model_validate_json(res.model_dump_json()) == res
    # An older backend, one that knows no clusters, sends none of the node fields.
    for gpu in data["gpus"]:
        del gpu["node"]
    del data["nodes"], data["nodes_lost"]
    old = Resources.model_validate(data)
    assert (old.nodes, old.nodes_lost) == ([], [])
    assert {g.node for g in old.gpus} == {None}


def test_one_machine_read_has_no_nodes(make_scheduler, fake_gpus) -> None:
    fake_gpus("2x24576")
    res = make_scheduler().resources()
    assert [(g.index, g.node) for g in res.gpus] == [(0, None), (1, None)]
    assert (res.nodes, res.nodes_lost) == ([], [])
