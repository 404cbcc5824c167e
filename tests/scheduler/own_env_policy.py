"""A shared policy for runs whose policy has its own Python environment: imports only the
public nodeset API (the host over there has nothing else of evaltui)."""

from __future__ import annotations

import importlib
import os

from evaltui.engine.nodes import NodeSet, node


class LinePolicyOwnEnv(NodeSet):
    """Steps towards the goal; ``marker`` names a file its host writes its PID to;
    ``needs``: a module that must import (one only its environment has)."""

    def __init__(self, marker: str = "", needs: str = "") -> None:
        if needs:
            importlib.import_module(needs)
        if marker:
            with open(marker, "w") as fh:
                fh.write(str(os.getpid()))

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs):
        return {"action": 1 if obs["goal"] > obs["pos"] else -1}
