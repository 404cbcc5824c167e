"""Admission across a Ray cluster: node GPU keys, the per-node probe, the cluster-wide
ledger actor, and moving runs off a node that left."""
