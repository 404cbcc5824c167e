"""Server-sent events: run state changes and finished episodes reach every client; a slow
client loses its oldest events (and is told), never blocking the scheduler."""

from __future__ import annotations

import asyncio
import queue
import threading
import time

from apihelpers import Backend, bot_spec

from evaltui.api.events import EventHub
from evaltui.api.sse import ServerEvent, iter_sse
from evaltui.contract.pidref import PidRef


def _collect(backend: Backend, out: queue.Queue, **kwargs: object) -> threading.Thread:
    def read() -> None:
        client = backend.client()
        try:
            for event in client.events(**kwargs):  # type: ignore[arg-type]
                out.put(event)
        except Exception as exc:  # the stream ends when the server stops
            out.put(exc)
        out.put(None)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _until(out: queue.Queue, cond, timeout: float = 30.0) -> list[ServerEvent]:
    seen: list[ServerEvent] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            item = out.get(timeout=0.2)
        except queue.Empty:
            continue
        assert isinstance(item, ServerEvent), item
        seen.append(item)
        if cond(seen):
            return seen
    raise AssertionError(f"events so far: {seen}")


def test_run_and_episode_events_stream_to_clients(backend: Backend) -> None:
    everything: queue.Queue = queue.Queue()
    _collect(backend, everything)
    time.sleep(0.3)  # subscribed before the submit
    run_id = backend.client().submit(bot_spec(3)).run_id
    other = backend.client().submit(bot_spec(1)).run_id
    one_run: queue.Queue = queue.Queue()
    _collect(backend, one_run, run_id=run_id, last_event_id=0)  # replays from the start

    def finished(events: list[ServerEvent]) -> bool:
        return sum(e.event == "run" and e.data["state"] == "done" for e in events) == 2

    events = _until(everything, finished)
    mine = [e for e in events if e.data.get("run_id") == run_id]
    states = [e.data["state"] for e in mine if e.event == "run"]
    assert states[0] == "queued" and states[-1] == "done" and "starting" in states
    assert sorted(e.data["episode_index"] for e in mine if e.event == "episode") == [0, 1, 2]
    ids = [e.id for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)

    filtered = _until(one_run, lambda ev: any(e.event == "run" and e.data["state"] == "done"
                                              for e in ev))
    assert {e.data["run_id"] for e in filtered} == {run_id} and other != run_id


def test_admit_changes_are_events(backend: Backend) -> None:
    out: queue.Queue = queue.Queue()
    _collect(backend, out)
    time.sleep(0.3)
    me = PidRef.current()
    entry = backend.client().create_admit("p", me.pid, me.create_time, marginal_vram_mb=0,
                                          exclusive_gpu=False)
    backend.client().release_admit(entry.admit_id)
    events = _until(out, lambda ev: any(e.event == "admit" and e.data["state"] == "released"
                                        for e in ev))
    states = [e.data["state"] for e in events if e.event == "admit"]
    assert states[0] == "waiting" and states[-1] == "released"
    assert {e.data["admit_id"] for e in events if e.event == "admit"} == {entry.admit_id}


def test_stream_ends_when_the_server_stops(backend: Backend) -> None:
    out: queue.Queue = queue.Queue()
    thread = _collect(backend, out)
    time.sleep(0.3)
    started = time.monotonic()
    backend.server.stop()
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - started < 5


def test_heartbeats_keep_idle_streams_alive(backend: Backend) -> None:
    http = backend.http()
    lines = []
    with http.stream("GET", "/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            lines.append(line)
            if line.startswith(": keep-alive"):
                break
    assert lines[0] == "retry: 2000"


def test_slow_client_drops_oldest_and_is_told() -> None:
    async def scenario() -> tuple[list[bytes], int]:
        hub = EventHub(queue_size=5, heartbeat_sec=0.05)
        sub = hub.subscribe()
        # A burst from another thread while this client reads nothing.
        pusher = threading.Thread(target=lambda: [hub.publish("run", {"run_id": str(i)})
                                                  for i in range(20)])
        pusher.start()
        pusher.join()
        frames = []
        stream = hub.stream(sub)
        async for frame in stream:
            frames.append(frame)
            if b"event: run" in frame and b'"19"' in frame:
                break
        await stream.aclose()
        return frames, len(hub._subs)

    frames, subs_left = asyncio.run(scenario())
    events = list(iter_sse(b"".join(frames).decode().split("\n")))
    assert events[0] == ServerEvent(None, "dropped", {"count": 15})
    assert [e.data["run_id"] for e in events[1:]] == [str(i) for i in range(15, 20)]
    assert subs_left == 0  # the closed stream unsubscribed


def test_publish_never_blocks_on_a_client() -> None:
    async def scenario() -> float:
        hub = EventHub(queue_size=10)
        hub.subscribe()
        started = time.perf_counter()
        for i in range(10_000):
            hub.publish("episode", {"run_id": "r", "episode_index": i})
        return time.perf_counter() - started

    assert asyncio.run(scenario()) < 2.0
