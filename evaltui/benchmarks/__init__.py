"""Built-in benchmarks shipped with evaltui (DESIGN §9).

Each benchmark is a subpackage holding its env nodeset, its reference policies and its
episode manifests (JSONL, one dataset episode per line) as package data.
"""
