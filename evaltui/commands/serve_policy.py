"""``evaltui serve-policy SOURCE``: serve a nodeset over openpi's websocket dialect, batched
across every connection (DESIGN §13, docs/policy-servers.md).

openpi's own ``openpi-client`` and evaltui's ``WebsocketPolicy`` nodeset both talk to it
unchanged. Loopback unless ``--host`` names another address, which needs
``--api-key-env``. Prints one line with the URL once it listens; SIGTERM or Ctrl-C
stops it, with a last line of what it served (requests, batch-size histogram; live at
``GET /stats``). Every input fault is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from evaltui.rundir.jsonfiles import write_json_atomic

DEFAULT_PORT = 8000
STATS_EVERY_SEC = 2.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-policy", help="serve a model over openpi's websocket protocol",
                       description="Serve one node of a nodeset (GRAPH:NODESET, e.g. "
                       "model:policy, or module:Class) over openpi's websocket dialect "
                       "(msgpack-numpy, metadata frame first, /healthz), batching requests "
                       "from every connection into one forward pass.")
    p.add_argument("source", metavar="SOURCE", help="GRAPH:NODESET or module:Class")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other needs "
                   "--api-key-env)")
    p.add_argument("--api-key-env", metavar="VAR", default=None,
                   help="environment variable holding the API key clients must present")
    p.add_argument("--max-batch", type=int, default=32,
                   help="most requests stacked into one forward pass (default 32; 1 "
                   "answers one request at a time)")
    p.add_argument("--max-wait-ms", type=float, default=5.0,
                   help="longest the first queued request waits for others (default 5)")
    p.add_argument("--op", default=None, help="the node op to serve, when there are several")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a nodeset param (JSON value), e.g. --param item_latency_ms=1")
    p.add_argument("--stats-file", type=Path, default=None, metavar="PATH",
                   help="keep the served statistics (requests, batch-size histogram, "
                   "connections) in this JSON file: rewritten every few seconds and at exit")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="OpenBLAS threads of the served model (default 1: numpy's BLAS "
                   "threads spin between the many small batches of a server; a model on "
                   "a GPU does not use them)")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"evaltui serve-policy: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    # Before numpy is imported (below): OpenBLAS reads it once. Same reason as a run's
    # nodeset hosts (engine/hosting/hostprocess.py): with its default threads, a batch
    # of 5 of the shipped model cost 115 ms instead of 15 on a loaded 2-core machine.
    if args.blas_threads >= 1:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.blas_threads))
    from evaltui.engine.hosting.policyserver import PolicyServer
    from evaltui.engine.hosting.policysource import SourceError, parse_params, resolve_source
    from evaltui.engine.usererrors import NodesetConstructorError, build_nodeset

    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be 0-65535 (0 picks a free one), got {args.port}")
    if args.max_batch < 1:
        return _fail(f"--max-batch must be >= 1, got {args.max_batch}")
    if args.max_wait_ms < 0:
        return _fail(f"--max-wait-ms must be >= 0, got {args.max_wait_ms}")
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env) or None
        if api_key is None:
            return _fail(f"--api-key-env: the environment variable {args.api_key_env} is "
                         "not set")
    try:
        source = resolve_source(args.source, args.op, parse_params(args.param))
        nodeset = build_nodeset(args.source, source.cls, source.params)
    except (SourceError, NodesetConstructorError) as exc:
        return _fail(str(exc))
    try:
        server = PolicyServer(nodeset, source.op, host=args.host, port=args.port,
                              api_key=api_key, max_batch=args.max_batch,
                              max_wait_ms=args.max_wait_ms,
                              metadata={"source": args.source,
                                        "nodeset": source.cls.__qualname__})
    except ValueError as exc:
        nodeset.close()
        return _fail(str(exc))
    try:
        asyncio.run(_serve(server, args))
    except OSError as exc:  # the port is taken, the address is not this machine's
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    finally:
        nodeset.close()
    return 0


async def _keep_stats(server: object, path: Path) -> None:
    from evaltui.engine.hosting.policyserver import PolicyServer

    assert isinstance(server, PolicyServer)
    while True:
        write_json_atomic(path, server.stats(), durable=False)
        await asyncio.sleep(STATS_EVERY_SEC)


async def _serve(server: object, args: argparse.Namespace) -> None:
    from evaltui.engine.hosting.policyserver import PolicyServer

    assert isinstance(server, PolicyServer)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def ready(port: int) -> None:
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"serving {args.source} ({server.metadata['nodeset']}.{server.op}) at "
              f"ws://{host}:{port} (health: http://{host}:{port}/healthz, batches of up to "
              f"{args.max_batch})", flush=True)

    keeper = asyncio.create_task(_keep_stats(server, args.stats_file)) \
        if args.stats_file else None
    try:
        await server.run(stop, ready)
    finally:
        if keeper is not None:
            keeper.cancel()
    stats = server.stats()
    if args.stats_file:
        write_json_atomic(args.stats_file, stats, durable=False)
    print(f"stopped: served {stats['requests_served']} requests in {stats['batches']} "
          f"batches (mean batch {stats['mean_batch_size']:g}, histogram "
          f"{stats['batch_size_histogram']})", flush=True)
