"""``MetaWorldLinearPolicy``: an example *model* graph's policy, a shared batched nodeset.

Untrained (its weights are a seeded random draw): it shows how a learned policy plugs into
the Meta-World graphs -- it reads only the ``obs`` port, is served once for every worker
and answers a batch of requests per call -- not a policy that solves tasks. Replace the
class by your model's (``evaltui eval mw_model --set policy.weights=...`` with your own
nodeset). Each row is computed on its own (a matrix-vector product per request), so an
action never depends on which other requests share its batch: K workers give the same
episodes as one.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import Field

from evaltui.engine.nodes import NodeSet, node

OBS_DIM, ACTION_DIM = 39, 4


class MetaWorldLinearPolicy(NodeSet):
    """``action = tanh(W obs + b)``, W and b drawn from N(0, scale^2) with ``seed``.

    Args:
        seed: seeds the weights.
        scale: standard deviation of the weights.
    """

    def __init__(self, seed: Annotated[int, Field(ge=0)] = 0,
                 scale: Annotated[float, Field(ge=0)] = 0.1) -> None:
        rng = np.random.default_rng(seed)
        self.weights = rng.normal(0.0, scale, (ACTION_DIM, OBS_DIM))
        self.bias = rng.normal(0.0, scale, ACTION_DIM)

    @node(inputs=("obs",), outputs=("action",), batched=True, batch_dim="obs")
    def act(self, obs: Any) -> dict[str, Any]:
        """Actions for a stacked batch of observations (leading axis = requests)."""
        x = np.asarray(obs, dtype=np.float64).reshape(-1, OBS_DIM)
        return {"action": np.stack([np.tanh(self.weights @ row + self.bias) for row in x])}

