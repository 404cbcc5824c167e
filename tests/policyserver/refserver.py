"""A reference openpi policy server, written here from openpi's published protocol and not
from evaltui's server: ``python refserver.py PORT MODE [API_KEY]``.

The protocol (openpi ``websocket_policy_server.py`` / ``openpi_client``): a binary msgpack
frame of metadata first; each binary request frame is answered by one binary frame;
numpy arrays are maps with bin keys ``__ndarray__``/``data``/``dtype``/``shape``; an error
is a *text* frame carrying a Python traceback; ``{"__ctrl__": ...}`` frames are acked;
the key arrives as ``Authorization: Api-Key KEY``. The codec below is this file's own.

The policy behind it is the shipped BabyAI model, asked one observation at a time (as
openpi's server does). ``MODE``: ``ok``; ``error`` (every request answers a traceback);
``slow`` (each reply 3 s late); ``malformed`` (the reply lacks ``action``); ``chunk``
(the reply is ``{"actions": [a, a, a, a]}``, the same action 4 times: the
client's ``replan_every`` steps through it). Each handshake is appended to
``$REFSERVER_LOG`` (one line, the Authorization header) so a test can count them.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import msgpack
import numpy as np
import websockets
from websockets.asyncio.server import serve

from evaltui.benchmarks.babyai.model import BabyAIModelPolicy


def encode(obj):
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str,
                b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(type(obj))


def decode(obj):
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]),
                          shape=obj[b"shape"])
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def main() -> None:
    port, mode = int(sys.argv[1]), sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 else None
    model = BabyAIModelPolicy()
    log = os.environ.get("REFSERVER_LOG")

    def infer(obs):
        batch = {k: np.asarray(v)[None] for k, v in obs.items()}
        return model.act(batch)["action"][0]

    def check(connection, request):
        if log:
            with open(log, "a") as fh:
                fh.write(f"{request.headers.get('Authorization')}\n")
        if request.path == "/healthz":
            return connection.respond(200, "OK\n")
        if key and request.headers.get("Authorization") != f"Api-Key {key}":
            return connection.respond(401, "Unauthorized\n")
        return None

    async def handler(ws):
        await ws.send(msgpack.packb({"policy": "babyai-reference", "action_dim": 1},
                                    default=encode))
        while True:
            try:
                request = msgpack.unpackb(await ws.recv(), object_hook=decode)
            except websockets.ConnectionClosed:
                return
            if "__ctrl__" in request:
                await ws.send(msgpack.packb({"__ack__": request["__ctrl__"]}))
                continue
            if mode == "error":
                await ws.send("Traceback (most recent call last):\n  File \"policy.py\", "
                              "line 3, in infer\nValueError: camera frame is empty")
                await ws.close()
                return
            started = time.monotonic()
            if mode == "slow":
                await asyncio.sleep(3.0)
            if mode == "chunk":
                obs = request["observation"]
                action = infer({"image": obs["image"], "direction": obs["state"],
                                "mission": request["prompt"]})
                reply = {"actions": np.full(4, action, dtype=np.int64)}
            else:
                action = infer(request["obs"])
                reply = {"act": action} if mode == "malformed" else {"action": action}
            reply["server_timing"] = {"infer_ms": (time.monotonic() - started) * 1e3}
            await ws.send(msgpack.packb(reply, default=encode))

    async def run():
        async with serve(handler, "127.0.0.1", port, compression=None, max_size=None,
                         process_request=check):
            print("ready", flush=True)
            await asyncio.Future()

    asyncio.run(run())


if __name__ == "__main__":
    main()
