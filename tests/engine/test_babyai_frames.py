"""GridFrames draws exactly minigrid's get_frame(highlight=False), pixel for pixel."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import redirect_stdout
from typing import Any

import numpy as np
import pytest

from evaltui.benchmarks.babyai import SPLITS, load_manifest
from evaltui.benchmarks.babyai.frames import GridFrames
from evaltui.benchmarks.babyai.minigrid_import import BabyAIBot, Grid, make_env
from evaltui.engine.episode.tiles import TiledFrame
from evaltui.engine.nodes import Frame

COLORS = ("red", "green", "blue", "purple", "yellow", "grey")


def reference(sim: Any, tile_size: int) -> np.ndarray:
    return sim.get_frame(highlight=False, tile_size=tile_size)


def assert_same(frames: GridFrames, sim: Any, what: str) -> None:
    got = frames.frame(sim)
    want = reference(sim, frames.tile_size)
    assert got.shape == want.shape, what
    diff = np.argwhere(got.pixels != want)
    assert not diff.size, f"{what}: first differing pixel (y, x, c) {diff[0].tolist()}"


@pytest.fixture()
def sim() -> Iterator[Any]:
    env = make_env("BabyAI-GoToLocal-v0")
    with redirect_stdout(io.StringIO()):
        env.reset(seed=0)
    yield env.unwrapped
    env.close()


def every_object() -> list[Any]:
    """One of each object type in each colour it takes, doors in each of their states."""
    from minigrid.core.world_object import Ball, Box, Door, Floor, Goal, Key, Lava, Wall

    objs: list[Any] = [Goal(), Lava()]
    for color in COLORS:
        objs += [Wall(color), Floor(color), Key(color), Ball(color), Box(color),
                 Door(color, is_open=True), Door(color), Door(color, is_locked=True)]
    return objs


def hand_grid(objs: list[Any], width: int = 12) -> Grid:
    height = (len(objs) + width - 1) // width + 2  # a free row for the agent, then a margin
    grid = Grid(width, height)
    for k, obj in enumerate(objs):
        grid.set(k % width, k // width, obj)
    return grid


@pytest.mark.parametrize(("tile_size", "everywhere"), [(8, True), (13, True), (32, False)])
def test_every_object_colour_door_state_and_agent_direction(sim: Any, tile_size: int,
                                                            everywhere: bool) -> None:
    objs = every_object()
    assert len({o.encode() for o in objs}) == len(objs) == 2 + 6 * 8
    sim.grid = hand_grid(objs)
    frames = GridFrames(tile_size)
    # The agent on an empty cell, and on every object (get_frame draws it over any tile);
    # at minigrid's default 32 px (slow to render) on the goal and an open door only.
    cells = [(0, sim.grid.height - 1)] + [(k % 12, k // 12) for k in range(len(objs))
                                          if everywhere or k in (0, 7)]
    for x, y in cells:
        for direction in range(4):
            sim.agent_pos, sim.agent_dir = (x, y), direction
            assert_same(frames, sim, f"agent at {(x, y)} facing {direction}")
    # Each tile was rendered once: 50 objects + empty, bare and under 4 directions.
    assert len(frames.atlas) == len(objs) + 1 + 4 * len(cells)


def test_in_place_changes_of_the_same_grid(sim: Any) -> None:
    from minigrid.core.world_object import Ball, Box, Door, Key

    door, box = Door("yellow", is_locked=True), Box("purple", contains=Key("red"))
    sim.grid = hand_grid([door, box, Ball("blue"), Key("green")], width=6)
    sim.agent_pos, sim.agent_dir = (2, 1), 3
    frames = GridFrames(8)
    changes = [
        ("unlock the door", lambda: setattr(door, "is_locked", False)),
        ("open the door", lambda: setattr(door, "is_open", True)),
        ("close it again", lambda: setattr(door, "is_open", False)),
        ("stand in the doorway", lambda: setattr(sim, "agent_pos", (0, 0))),
        ("pick the ball up", lambda: sim.grid.set(2, 0, None)),
        ("box opens into its key", lambda: sim.grid.set(1, 0, box.contains)),
        ("drop a ball elsewhere", lambda: sim.grid.set(4, 1, Ball("grey"))),
        ("turn", lambda: setattr(sim, "agent_dir", 0)),
        ("a new grid", lambda: setattr(sim, "grid", hand_grid([Door("red")], width=3))),
    ]
    assert_same(frames, sim, "start")
    for what, change in changes:
        if what == "a new grid":
            sim.agent_pos = (1, 1)
        change()
        assert_same(frames, sim, what)


def walk(split: str, episodes: int, seed: int) -> Iterator[tuple[str, Any]]:
    """Resets and steps of ``split``: the bot, with a random action (any of pickup, drop,
    toggle, ...) instead a third of the time, so doors open and objects move."""
    env = make_env(SPLITS[split])
    rng = np.random.default_rng(seed)
    try:
        for ep in load_manifest(split, episodes):
            with redirect_stdout(io.StringIO()):
                env.reset(seed=ep["seed"])
            sim = env.unwrapped
            bot = BabyAIBot(sim)
            yield f"{ep['episode_id']} reset", sim
            for step in range(1, 41):
                action = int(rng.integers(6)) if rng.random() < 0.35 else None
                if action is None:
                    try:
                        action = int(bot.replan())
                    except AssertionError:  # the bot gives up on some states random moves make
                        action = int(rng.integers(6))
                if action != 6:
                    bot = BabyAIBot(sim)  # replan from the state as it now is
                _, _, terminated, truncated, _ = env.step(action)
                yield f"{ep['episode_id']} step {step} (action {action})", sim
                if terminated or truncated:
                    break
    finally:
        env.close()


@pytest.mark.parametrize("split", list(SPLITS))
def test_real_resets_and_steps(split: str) -> None:
    frames = GridFrames(8)
    compared = changed = 0
    previous = None
    for what, sim in walk(split, episodes=8, seed=7):
        assert_same(frames, sim, what)
        encoding = sim.grid.encode()
        changed += previous is not None and previous.shape == encoding.shape and \
            not np.array_equal(previous, encoding)
        previous = encoding
        compared += 1
    assert compared >= 100
    assert changed >= 2, f"no step changed the {split} grid: doors and pickups untested"


def test_tiled_frame_is_a_frame_and_pickles_as_pixels(sim: Any) -> None:
    import pickle

    frame = GridFrames(8).frame(sim)
    assert isinstance(frame, TiledFrame) and isinstance(frame, Frame)
    assert frame.index.dtype == np.uint16 and frame.index.shape == (sim.height, sim.width)
    copy = pickle.loads(pickle.dumps(frame))
    assert type(copy) is Frame and np.array_equal(copy.pixels, reference(sim, 8))


def test_tiles_come_back_from_the_disk_cache_unchanged(sim: Any) -> None:
    from evaltui.benchmarks.babyai import tilecache

    sim.grid = hand_grid(every_object())
    first = GridFrames(8)
    for direction in range(4):
        sim.agent_pos, sim.agent_dir = (direction, 0), direction
        first.frame(sim)
    path = tilecache.cache_path(8)
    size = path.stat().st_size
    assert path.stat().st_mode & 0o777 == 0o600  # in the state dir: private (DESIGN §11)
    assert len(tilecache.load_tiles(8)) == len(first.atlas) == 51 + 4
    again = GridFrames(8)  # a later worker: every tile known, nothing rendered or appended
    assert len(again.atlas) == len(first.atlas)
    for direction in range(4):
        sim.agent_pos, sim.agent_dir = (direction, 0), direction
        assert_same(again, sim, f"cached tiles, agent facing {direction}")
    assert path.stat().st_size == size


def test_a_corrupt_disk_cache_is_cut_back_to_its_good_records(sim: Any) -> None:
    from evaltui.benchmarks.babyai import tilecache

    frames = GridFrames(8)
    frames.frame(sim)
    path = tilecache.cache_path(8)
    raw = bytearray(path.read_bytes())
    record = len(raw) // len(frames.atlas)
    assert len(frames.atlas) >= 3 and record * len(frames.atlas) == len(raw)
    raw[2 * record + 40] ^= 0xFF  # one wrong pixel in the third tile
    path.write_bytes(bytes(raw))
    assert len(tilecache.load_tiles(8)) == 2
    assert path.stat().st_size == 2 * record and path.stat().st_mode & 0o777 == 0o600
    assert_same(GridFrames(8), sim, "after the cut, the rest is rendered again")
    assert path.stat().st_size == len(raw)
