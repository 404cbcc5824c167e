"""``evaltui serve-policy SOURCE``: serve a nodeset over openpi's websocket dialect, batched
across every connection (DESIGN §13, docs/policy-servers.md).

openpi's own ``openpi-client`` and evaltui's ``WebsocketPolicy`` nodeset both talk to it
unchanged. Loopback unless ``--host`` names another address, which needs
``--api-key-env``. Prints one line with the URL once it listens; SIGTERM or Ctrl-C
stops it, with a last line of what it served (requests, batch-size histogram; live at
``GET /stats``). Every input fault is one line on stderr, exit 2.

It is a queue entry of its own (kind ``serve``, commands/servequeue.py): admitted by a
backend like any run before it loads the model, its GPU memory (and cores) reserved while
it serves, listed by ``ls``, the API and the TUI with its URL and requests served, and
stopped by ``evaltui cancel admit:ID``. ``--no-queue`` serves at once, reserving nothing.
Exit codes: 0 stopped (SIGTERM, Ctrl-C, cancel), 2 bad input, 125 no backend or not
admitted, 128+N a signal while queued.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.commands.servequeue import ServeQueue
from evaltui.engine.hosting.policysource import SourceError, parse_params, resolve_source
from evaltui.engine.usererrors import NodesetConstructorError, build_nodeset
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import outputs_root
from evaltui.scheduler.admission.calibration import Calibration, nodeset_key
from evaltui.wrapper.ports import parse_pool, port_pool
from evaltui.wrapper.profiles import ProfileError, ResolvedProfile, resolve_profile

if TYPE_CHECKING:
    from evaltui.engine.hosting.policyserver import PolicyServer

DEFAULT_PORT = 8000
STATS_EVERY_SEC = 2.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-policy",
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
    q = p.add_argument_group("admission (a queue entry of kind serve, as `evaltui run` has)")
    q.add_argument("--profile", default="serve-policy",
                   help="profiles.yaml profile of what it holds while it serves "
                   "(marginal_vram_mb, exclusive_gpu, priority, cpus; default "
                   "'serve-policy'; a profile not described takes a whole GPU)")
    q.add_argument("--vram-mb", type=int, default=None, metavar="MIB",
                   help="GPU memory to reserve, instead of the profile's")
    q.add_argument("--cpus", type=float, default=None,
                   help="CPU cores to reserve, instead of the profile's")
    q.add_argument("--ram-mb", type=int, default=None, metavar="MIB",
                   help="host RAM to reserve (default: what runs of this nodeset and "
                   "earlier servers of it measured, if any)")
    q.add_argument("--profiles", type=Path, help="profiles file (default ./profiles.yaml, "
                   "then the state dir's)")
    q.add_argument("--outputs", help="outputs root of a backend started here")
    q.add_argument("--ports", help="backend port pool, LO-HI or a comma list (default "
                   "$EVALTUI_PORT_POOL or 8765-8769)")
    q.add_argument("--no-queue", action="store_true",
                   help="serve at once, without admission: nothing reserved or listed")
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
    # start-up: numpy (policyserver's) only now, after OPENBLAS_NUM_THREADS (above)
    from evaltui.engine.hosting.policyserver import address_problem

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
    if (problem := address_problem(args.host, api_key)) is not None:
        return _fail(problem)  # before it queues
    if args.vram_mb is not None and args.vram_mb < 0:
        return _fail(f"--vram-mb must be >= 0, got {args.vram_mb}")
    if args.ram_mb is not None and args.ram_mb < 0:
        return _fail(f"--ram-mb must be >= 0, got {args.ram_mb}")
    if args.cpus is not None and args.cpus <= 0:
        return _fail(f"--cpus must be > 0, got {args.cpus}")
    try:
        source = resolve_source(args.source, args.op, parse_params(args.param))
    except SourceError as exc:
        return _fail(str(exc))
    queue = None
    if not args.no_queue:
        queue = _queue(args, source)
        if isinstance(queue, int):
            return queue
        got = queue.admit()
        if isinstance(got, int):
            return got
        os.environ.update(got)  # its GPU, before the model loads
    try:
        return _serve_admitted(args, source, api_key, queue)
    finally:
        if queue is not None:
            queue.close()
            queue.record_ram_peak()


def _queue(args: argparse.Namespace, source: Any) -> ServeQueue | int:
    """The admit entry to queue (not yet queued), or an exit code for bad options.

    What it reserves: GPU memory declared (``--vram-mb``, else the profile when
    profiles.yaml describes it), else calibrated (the peak that runs of the same nodeset,
    impl and params, measured: scheduler/admission/calibration.py), else a whole GPU;
    host RAM declared (``--ram-mb``) else calibrated (runs, and earlier servers of it),
    else none; cores ``--cpus`` else the profile's."""
    try:
        profile = resolve_profile(args.profile, args.profiles)
        pool = parse_pool(args.ports, source="--ports") if args.ports else port_pool()
    except (ProfileError, ValueError) as exc:
        return _fail(str(exc))
    calibration, key = Calibration(), nodeset_key(source.impl, source.params)
    asked = {k: v for k, v in (("marginal_vram_mb", args.vram_mb), ("cpus", args.cpus))
             if v is not None}
    said = [f"{'--vram-mb' if k == 'marginal_vram_mb' else '--cpus'} {v:g}"
            for k, v in asked.items()]
    if args.vram_mb is None and not profile.found:
        peak = calibration.peak("vram", key)
        if peak is not None:
            asked["marginal_vram_mb"] = peak
            said.append(f"{peak} MiB of GPU memory calibrated (runs of "
                        f"{source.cls.__qualname__} with these params peaked there)")
    if asked:
        base = profile.profile if profile.found else profile.profile.model_copy(
            update={"exclusive_gpu": False})
        profile = ResolvedProfile(profile.name, base.model_copy(update=asked),
                                  f"{profile.source}; " + "; ".join(said), profile.found)
    argv = ["evaltui", "serve-policy", *sys.argv[2:]] if sys.argv[1:2] == ["serve-policy"] \
        else ["evaltui", "serve-policy", args.source]
    queue = ServeQueue(argv, profile, outputs_root(args.outputs), pool)
    queue.ram_mb = args.ram_mb if args.ram_mb is not None else calibration.peak("ram", key)
    queue.calibration_part = (calibration, key, source)
    return queue


def _serve_admitted(args: argparse.Namespace, source: Any, api_key: str | None,
                    queue: ServeQueue | None) -> int:
    # start-up: numpy (policyserver's) after OPENBLAS_NUM_THREADS: see run()
    from evaltui.engine.hosting.policyserver import PolicyServer

    try:
        nodeset = build_nodeset(args.source, source.cls, source.params)
    except NodesetConstructorError as exc:
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
        asyncio.run(_serve(server, args, queue))
    except OSError as exc:  # the port is taken, the address is not this machine's
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    finally:
        nodeset.close()
    return 0


async def _keep_stats(server: PolicyServer, path: Path) -> None:
    while True:
        write_json_atomic(path, server.stats(), durable=False)
        await asyncio.sleep(STATS_EVERY_SEC)


async def _serve(server: PolicyServer, args: argparse.Namespace,
                 queue: ServeQueue | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    listening: list[str] = []

    def served() -> tuple[str, int] | None:
        return (listening[0], int(server.stats()["requests_served"])) if listening else None

    done = threading.Event()
    reporter = threading.Thread(target=queue.report, name="serve-report", daemon=True,
                                args=(served, lambda: loop.call_soon_threadsafe(stop.set),
                                      done)) if queue is not None else None

    def ready(port: int) -> None:
        host = f"[{args.host}]" if ":" in args.host else args.host
        listening.append(f"ws://{host}:{port}")
        if reporter is not None:
            reporter.start()
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
        done.set()
        if reporter is not None and reporter.is_alive():
            await asyncio.to_thread(reporter.join)
    stats = server.stats()
    if args.stats_file:
        write_json_atomic(args.stats_file, stats, durable=False)
    print(f"stopped: served {stats['requests_served']} requests in {stats['batches']} "
          f"batches (mean batch {stats['mean_batch_size']:g}, histogram "
          f"{stats['batch_size_histogram']})", flush=True)
