"""Train the BabyAI policy shipped in evaltui/benchmarks/babyai/data/policy.npz.

Behaviour cloning of the BabyAI expert bot on GoToLocal levels with seeds from 10 000
up (the shipped manifests use seeds 0-499, so no evaluation level is ever trained on):

1. expert rollouts with DART noise: with probability ``--noise`` a random move is taken
   instead of the bot's, and the bot's own action is the label, so the data shows how
   to recover from mistakes;
2. DAgger rounds: the current network drives, the bot labels every state it visits;
3. int8 quantization with calibrated 7-bit activations (see ``model.py`` for why), and
   a check of the quantized policy on held-out seeds from 20 000 up.

Deterministic: fixed seeds, single-threaded BLAS, rollouts gathered in seed order, and
an .npz with fixed timestamps -- a rerun writes the same bytes. About a minute on two
cores. Usage: ``python scripts/train_babyai_policy.py [--out PATH] [--quick]``;
``--checkpoint-dir DIR --every N`` also writes the policy every N epochs, for
``evaltui set watch`` to evaluate as training goes (a learning curve).
"""

from __future__ import annotations

import os

# Before numpy loads: one BLAS thread makes every sum's order, so the weights, fixed.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from evaltui.benchmarks.babyai.model import (  # noqa: E402
    ACTIVATION_MAX,
    DEFAULT_WEIGHTS,
    NUM_ACTIONS,
    NUM_FEATURES,
    QuantizedMLP,
    encode,
    save_weights,
)

ENV_ID = "BabyAI-GoToLocal-v0"
TRAIN_SEED0, DAGGER_SEED0, HELDOUT_SEED0 = 10_000, 15_000, 20_000
MOVES = (0, 1, 2)  # left, right, forward: the random actions of DART noise
Params = list[np.ndarray]
Model = tuple[str, Any] | None
"""Who drives a rollout: None (the bot, with noise), ("float", params) or ("quantized", arrays)."""


# ---- rollouts (run in a process pool; each call is one chunk of seeds) ---------------------
def rollout_chunk(job: tuple[list[int], float, Model]) -> dict[str, Any]:
    """Roll out one episode per seed: bot-driven with noise, or network-driven (DAgger).

    Returns the visited observations with the bot's labels, and how many succeeded.
    """
    seeds, noise, model = job
    from evaltui.benchmarks.babyai.minigrid_import import BabyAIBot, make_env, quiet_stdout

    if model is not None and model[0] == "quantized":
        net = QuantizedMLP(model[1])
        policy = net.logits
    elif model is not None:
        params = model[1]

        def policy(x: np.ndarray) -> np.ndarray:
            return forward(params, x)[-1]

    env = make_env(ENV_ID)
    images, dirs, missions, labels, successes = [], [], [], [], 0
    for seed in seeds:
        rng = np.random.default_rng([seed, 1])
        with quiet_stdout():
            obs, _ = env.reset(seed=seed)
        bot = BabyAIBot(env)
        deviated = None
        for _ in range(64):
            try:
                label = int(bot.replan(deviated))
            except Exception:  # the bot gives up in rare states: keep what we have
                break
            images.append(obs["image"])
            dirs.append(obs["direction"])
            missions.append(obs["mission"])
            labels.append(label)
            if model is not None:
                x = encode(obs["image"][None], [obs["direction"]], [obs["mission"]])
                action = int(policy(x).argmax())
            elif rng.random() < noise:
                action = MOVES[int(rng.integers(len(MOVES)))]
            else:
                action = label
            deviated = action if action != label else None
            obs, reward, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                successes += int(terminated and reward > 0)
                break
    env.close()
    return {"images": images, "dirs": dirs, "missions": missions, "labels": labels,
            "successes": successes, "episodes": len(seeds)}


def collect(pool: Any, seeds: range, noise: float, model: Model,
            chunk: int = 100) -> tuple[np.ndarray, np.ndarray, float]:
    jobs = [(list(seeds[i:i + chunk]), noise, model) for i in range(0, len(seeds), chunk)]
    parts = list(pool.imap(rollout_chunk, jobs))  # imap keeps seed order: deterministic
    images = np.stack([im for p in parts for im in p["images"]])
    x = encode(images, [d for p in parts for d in p["dirs"]],
               [m for p in parts for m in p["missions"]])
    y = np.array([a for p in parts for a in p["labels"]], dtype=np.intp)
    success = sum(p["successes"] for p in parts) / max(sum(p["episodes"] for p in parts), 1)
    return x, y, success


# ---- the float network and its training ----------------------------------------------------
def init_params(sizes: list[int], seed: int) -> Params:
    rng = np.random.default_rng(seed)
    params: Params = []
    for fan_in, fan_out in zip(sizes, sizes[1:], strict=False):
        params.append((rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in))
                      .astype(np.float32))
        params.append(np.zeros(fan_out, dtype=np.float32))
    return params


def forward(params: Params, x: np.ndarray) -> list[np.ndarray]:
    """Pre-activations of every layer (the last one is the logits)."""
    zs, h = [], x
    for i in range(0, len(params), 2):
        z = h @ params[i] + params[i + 1]
        zs.append(z)
        h = np.maximum(z, 0.0)
    return zs


def train(params: Params, x: np.ndarray, y: np.ndarray, *, epochs: int, seed: int,
          lr: float = 1e-3, batch: int = 256, decay: float = 1e-5,
          on_epoch: Callable[[Params, np.ndarray], None] | None = None) -> float:
    """Adam on softmax cross-entropy; returns the final training accuracy.

    ``on_epoch(params, x)`` is called after every epoch (checkpoints)."""
    rng = np.random.default_rng(seed)
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    b1, b2, t = 0.9, 0.999, 0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch):
            idx = order[start:start + batch]
            xb, yb = x[idx], y[idx]
            zs = forward(params, xb)
            p = np.exp(zs[-1] - zs[-1].max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(idx)), yb] -= 1.0
            grad = p / len(idx)
            grads: Params = [np.empty(0)] * len(params)
            for layer in range(len(params) // 2 - 1, -1, -1):
                inputs = xb if layer == 0 else np.maximum(zs[layer - 1], 0.0)
                grads[2 * layer] = inputs.T @ grad + decay * params[2 * layer]
                grads[2 * layer + 1] = grad.sum(axis=0)
                if layer:
                    grad = (grad @ params[2 * layer].T) * (zs[layer - 1] > 0)
            t += 1
            for i, g in enumerate(grads):
                m[i] = b1 * m[i] + (1 - b1) * g
                v[i] = b2 * v[i] + (1 - b2) * g * g
                mhat = m[i] / (1 - b1 ** t)
                vhat = v[i] / (1 - b2 ** t)
                params[i] -= (lr * mhat / (np.sqrt(vhat) + 1e-8)).astype(np.float32)
        if on_epoch is not None:
            on_epoch(params, x)
    return float((forward(params, x)[-1].argmax(axis=1) == y).mean())


# ---- quantization --------------------------------------------------------------------------
def quantize(params: Params, x: np.ndarray) -> dict[str, np.ndarray]:
    """int8 weights (a scale per output unit), 7-bit activation steps calibrated on ``x``."""
    arrays: dict[str, np.ndarray] = {"layers": np.array(len(params) // 2)}
    zs = forward(params, x)
    for layer in range(len(params) // 2):
        w, b = params[2 * layer], params[2 * layer + 1]
        in_step = 1.0 if layer == 0 else float(arrays[f"a{layer - 1}"])
        scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
        arrays[f"w{layer}"] = np.rint(w / scale).astype(np.int8)
        # Input h is (integer activations) * in_step, so fold in_step into the scale.
        arrays[f"s{layer}"] = (scale * in_step).astype(np.float32)
        arrays[f"b{layer}"] = b.astype(np.float32)
        if layer < len(params) // 2 - 1:
            top = float(np.quantile(np.maximum(zs[layer], 0.0), 0.9999))
            arrays[f"a{layer}"] = np.array(max(top, 1e-6) / ACTIVATION_MAX, dtype=np.float32)
    return arrays


class Checkpoints:
    """Every ``every`` epochs (counted over the whole training), the quantized policy as
    ``DIR/policy_{epoch:06d}.npz``: written under a temporary name and renamed, then its
    sidecar ``.npz.done`` -- so ``evaltui set watch`` never reads half a file."""

    def __init__(self, directory: Path, every: int) -> None:
        if every < 1:
            raise SystemExit(f"--every must be >= 1, got {every}")
        self.directory = directory
        self.every = every
        self.epoch = 0
        directory.mkdir(parents=True, exist_ok=True)

    def __call__(self, params: Params, x: np.ndarray) -> None:
        self.epoch += 1
        if self.epoch % self.every:
            return
        path = self.directory / f"policy_{self.epoch:06d}.npz"
        tmp = self.directory / f".{path.name}.tmp"
        save_weights(tmp, quantize(params, x))
        os.replace(tmp, path)
        (self.directory / f"{path.name}.done").touch()
        print(f"checkpoint {path}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_WEIGHTS)
    parser.add_argument("--episodes", type=int, default=3000, help="expert episodes")
    parser.add_argument("--dagger-rounds", type=int, default=3)
    parser.add_argument("--dagger-episodes", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=10, help="epochs of the first fit")
    parser.add_argument("--dagger-epochs", type=int, default=3, help="epochs after each round")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 128])
    parser.add_argument("--noise", type=float, default=0.25)
    parser.add_argument("--heldout", type=int, default=300)
    parser.add_argument("--quick", action="store_true",
                        help="a tiny run (seconds) for checking the pipeline")
    parser.add_argument("--checkpoint-dir", type=Path, default=None,
                        help="write intermediate checkpoints here (policy_EPOCH.npz)")
    parser.add_argument("--every", type=int, default=1,
                        help="epochs between checkpoints (with --checkpoint-dir)")
    args = parser.parse_args()
    save = Checkpoints(args.checkpoint_dir, args.every) if args.checkpoint_dir else None
    if args.quick:
        args.episodes, args.dagger_rounds, args.dagger_episodes = 60, 1, 30
        args.epochs, args.dagger_epochs, args.hidden, args.heldout = 2, 1, [32], 20
    started = time.perf_counter()
    report: dict[str, Any] = {}
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        x, y, expert_sr = collect(pool, range(TRAIN_SEED0, TRAIN_SEED0 + args.episodes),
                                  args.noise, None)
        report["expert_samples"], report["expert_sr_with_noise"] = len(y), expert_sr
        params = init_params([NUM_FEATURES, *args.hidden, NUM_ACTIONS], seed=0)
        report["bc_accuracy"] = train(params, x, y, epochs=args.epochs, seed=1, on_epoch=save)
        for r in range(args.dagger_rounds):
            seed0 = DAGGER_SEED0 + r * args.dagger_episodes
            dx, dy, sr = collect(pool, range(seed0, seed0 + args.dagger_episodes), 0.0,
                                 ("float", params))
            report[f"dagger{r}_policy_sr"] = sr
            x, y = np.concatenate([x, dx]), np.concatenate([y, dy])
            report[f"dagger{r}_accuracy"] = train(params, x, y, epochs=args.dagger_epochs,
                                                  seed=2 + r, on_epoch=save)
        arrays = quantize(params, x)
        net = QuantizedMLP(arrays)
        report["quantized_agreement"] = float(
            (net.logits(x).argmax(axis=1) == forward(params, x)[-1].argmax(axis=1)).mean())
        _, _, heldout_sr = collect(pool, range(HELDOUT_SEED0, HELDOUT_SEED0 + args.heldout),
                                   0.0, ("quantized", arrays))
        report["heldout_sr"] = heldout_sr
    report["samples"] = len(y)
    report["seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_weights(args.out, arrays)
    report["bytes"] = args.out.stat().st_size
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v
                      for k, v in report.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
