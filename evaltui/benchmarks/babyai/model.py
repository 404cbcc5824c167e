"""``BabyAIModelPolicy``: a small numpy MLP for BabyAI "go to" missions, served batched.

The policy reads only what an agent may see -- the ``obs`` loop port: the 7x7x3
egocentric view, the direction and the mission -- never the simulator. It is trained by
behaviour cloning (with DART noise and DAgger rounds) on expert-bot trajectories of
GoToLocal levels with seeds 10 000 and up, disjoint from the shipped manifests (seeds
0-499); ``scripts/train_babyai_policy.py`` rebuilds ``data/policy.npz`` bit for bit.

Input features (:func:`encode`, 1044 zeros and ones): per view cell a one-hot of object
type, colour and state; per view cell whether its object matches the mission's
description; the direction; the mission's colour and type.

Inference is *batch-invariant*: a request's action does not depend on which other
requests share its batch, so K workers give bit-identical episodes to one worker. BLAS
sums in an order that depends on the batch size, so the network is quantized such that
every sum is exact: int8 weights, 0/1 inputs and 7-bit activations make every partial
sum an integer below 2**24, which float32 represents exactly in any order; the scales
and biases are then applied elementwise (one IEEE rounding per element, the same in
every batch).
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from evaltui.engine.nodes import NodeSet, node

from . import DATA_DIR

DEFAULT_WEIGHTS = DATA_DIR / "policy.npz"

# minigrid's encoding (minigrid.core.constants), fixed here so that serving the model
# does not import minigrid at all.
NUM_TYPES, NUM_COLOURS, NUM_STATES = 11, 6, 3
COLOURS = ("red", "green", "blue", "purple", "yellow", "grey")
MISSION_TYPES = {"key": 5, "ball": 6, "box": 7, "door": 4}
VIEW = 7
CELL_FEATURES = NUM_TYPES + NUM_COLOURS + NUM_STATES
ANY_COLOUR = len(COLOURS)

CELLS_AT = 0
MATCH_AT = CELLS_AT + VIEW * VIEW * CELL_FEATURES
DIRECTION_AT = MATCH_AT + VIEW * VIEW
COLOUR_AT = DIRECTION_AT + 4
TYPE_AT = COLOUR_AT + len(COLOURS) + 1
NUM_FEATURES = TYPE_AT + len(MISSION_TYPES)
NUM_ACTIONS = 7
ACTIVATION_MAX = 127.0

_MISSION_RE = re.compile(
    rf"go to (?:the|a) (?:({'|'.join(COLOURS)}) )?({'|'.join(MISSION_TYPES)})\b")


@lru_cache(maxsize=4096)
def parse_mission(mission: str) -> tuple[int, int]:
    """``"go to the red ball"`` -> (colour index or ANY_COLOUR, index into MISSION_TYPES).

    A mission this policy does not understand is (ANY_COLOUR, -1): no target features.
    """
    m = _MISSION_RE.search(mission)
    if m is None:
        return ANY_COLOUR, -1
    colour = COLOURS.index(m.group(1)) if m.group(1) else ANY_COLOUR
    return colour, list(MISSION_TYPES).index(m.group(2))


def encode(images: Any, directions: Any, missions: Sequence[str]) -> np.ndarray:
    """Features of a batch: images (B,7,7,3) uint8, directions (B,), missions (B,) str."""
    img = np.asarray(images)
    n = img.shape[0] if img.ndim == 4 else -1
    if img.shape != (n, VIEW, VIEW, 3) or img.dtype.kind not in "iu":
        raise ValueError(f"obs.image must be a (B, 7, 7, 3) integer array, got "
                         f"{img.shape} {img.dtype}")
    direction = np.asarray(directions).astype(np.intp).reshape(-1)
    if direction.shape != (n,) or not np.all((direction >= 0) & (direction < 4)):
        raise ValueError(f"obs.direction must be {n} values in 0..3, got {direction}")
    cells = img.reshape(n, VIEW * VIEW, 3).astype(np.intp)
    limits = np.array([NUM_TYPES, NUM_COLOURS, NUM_STATES])
    if np.any(cells < 0) or np.any(cells >= limits):
        raise ValueError("obs.image holds values outside minigrid's type/colour/state codes")
    parsed = np.array([parse_mission(str(m)) for m in missions], dtype=np.intp).reshape(n, 2)
    colour, mtype = parsed[:, 0], parsed[:, 1]

    x = np.zeros((n, NUM_FEATURES), dtype=np.float32)
    rows = np.arange(n)[:, None]
    base = CELLS_AT + np.arange(VIEW * VIEW) * CELL_FEATURES
    x[rows, base + cells[:, :, 0]] = 1.0
    x[rows, base + NUM_TYPES + cells[:, :, 1]] = 1.0
    x[rows, base + NUM_TYPES + NUM_COLOURS + cells[:, :, 2]] = 1.0
    target_type = np.where(mtype >= 0, np.array(list(MISSION_TYPES.values()))[mtype], -1)
    match = (cells[:, :, 0] == target_type[:, None]) & (
        (colour[:, None] == ANY_COLOUR) | (cells[:, :, 1] == colour[:, None]))
    x[:, MATCH_AT:DIRECTION_AT] = match
    x[rows[:, 0], DIRECTION_AT + direction] = 1.0
    x[rows[:, 0], COLOUR_AT + colour] = 1.0
    known = mtype >= 0
    x[rows[known, 0], TYPE_AT + mtype[known]] = 1.0
    return x


class QuantizedMLP:
    """ReLU MLP with int8 weights and 7-bit activations: exact, batch-invariant sums."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        count = int(np.asarray(arrays["layers"]).item())
        self.weights = [arrays[f"w{i}"].astype(np.float32) for i in range(count)]
        self.scales = [arrays[f"s{i}"].astype(np.float32) for i in range(count)]
        self.biases = [arrays[f"b{i}"].astype(np.float32) for i in range(count)]
        # Activation quantization steps between layers (one per hidden layer).
        self.steps = [np.float32(np.asarray(arrays[f"a{i}"]).item()) for i in range(count - 1)]

    @classmethod
    def load(cls, path: str | Path) -> QuantizedMLP:
        with np.load(path) as data:
            return cls({k: data[k] for k in data.files})

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits (B, actions) of features (B, NUM_FEATURES) of zeros and ones."""
        h = x.astype(np.float32, copy=False)
        last = len(self.weights) - 1
        for i, (w, s, b) in enumerate(zip(self.weights, self.scales, self.biases, strict=True)):
            z = (h @ w) * s + b  # h @ w is an exact integer sum; then elementwise ops
            if i == last:
                return z
            h = np.minimum(np.rint(np.maximum(z, 0.0) / self.steps[i]), ACTIVATION_MAX)
        raise AssertionError("unreachable: a network has at least one layer")


def save_weights(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write an .npz with fixed zip timestamps, so that retraining reproduces the bytes."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[name]),
                                      allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


class BabyAIModelPolicy(NodeSet):
    """The shipped BabyAI policy as a shared, batched nodeset.

    Args:
        weights: an .npz written by ``scripts/train_babyai_policy.py``; default: the
            one shipped in the package.
        forward_latency_ms: sleep once per forward pass, whatever its batch size, to
            emulate a model whose forward pass is bound by an accelerator's fixed
            per-call cost (benchmarks; like the env's ``sim_latency_ms``).
        item_latency_ms: sleep this much more per request in the batch, to emulate a
            model whose pass grows with its batch (compute-bound: what replicas on more
            GPUs divide).
    """

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        """At spec check: a ``weights`` file that is not there is refused before the run."""
        weights = params.get("weights")
        if weights and not Path(str(weights)).expanduser().is_file():
            raise ValueError(f"weights: no such file {str(weights)!r}")

    # The bound is checked at spec check (engine.paramtypes), before a run dir exists.
    def __init__(self, weights: str | None = None,
                 forward_latency_ms: Annotated[float, Field(ge=0)] = 0.0,
                 item_latency_ms: Annotated[float, Field(ge=0)] = 0.0) -> None:
        if forward_latency_ms < 0:
            raise ValueError(f"forward_latency_ms must be >= 0, got {forward_latency_ms}")
        if item_latency_ms < 0:
            raise ValueError(f"item_latency_ms must be >= 0, got {item_latency_ms}")
        self.weights_path = Path(weights).expanduser() if weights else DEFAULT_WEIGHTS
        self.net = QuantizedMLP.load(self.weights_path)
        self.forward_latency_ms = forward_latency_ms
        self.item_latency_ms = item_latency_ms

    @node(inputs=("obs",), outputs=("action",), batched=True, batch_dim="obs")
    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """Greedy actions for a stacked batch of observations (leading axis = requests)."""
        x = encode(obs["image"], obs["direction"], obs["mission"])
        latency_ms = self.forward_latency_ms + self.item_latency_ms * len(x)
        if latency_ms:
            time.sleep(latency_ms / 1000.0)
        return {"action": self.net.logits(x).argmax(axis=1)}
