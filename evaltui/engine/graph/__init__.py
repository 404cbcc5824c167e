"""A graph and what it runs on: nodesets wired into a DAG, the episodes, the spec checks."""
