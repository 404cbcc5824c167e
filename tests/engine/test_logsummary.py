"""summarise: the log.jsonl stand-ins of node inputs and outputs (DESIGN §2).

The function has a fast path for exact common types and remembers types that are no
data; these tests pin the stand-ins down, including the cases where a remembered
verdict or the fast path could differ from the full rules (subclasses, depth cuts,
objects that claim another class).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import orjson

from evaltui.engine.episode.logsummary import MAX_DEPTH, MAX_LIST, MAX_STR, SMALL_ARRAY, summarise
from evaltui.engine.episode.tiles import TileAtlas, TiledFrame
from evaltui.engine.nodes import Frame


def nested(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = {"x": value}
    return value


def at_depth(summary: Any, levels: int) -> Any:
    for _ in range(levels):
        summary = summary["x"]
    return summary


class Handle:
    """A simulator handle: no data."""


class Attrs(Mapping[str, int]):
    """A Mapping that is no dict."""

    def __getitem__(self, key: str) -> int:
        return {"a": 1}[key]

    def __iter__(self) -> Iterator[str]:
        return iter(["a"])

    def __len__(self) -> int:
        return 1


class Claims:
    """An object proxy whose ``__class__`` may claim to be a list (isinstance believes it)."""

    def __init__(self, claim: bool) -> None:
        self.claim = claim

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return list if self.claim else Claims

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: slice) -> list[int]:
        return [1, 2][index]


def test_scalars_strings_and_numpy_scalars() -> None:
    assert [summarise(v) for v in (None, True, 3, 2.5, "go")] == [None, True, 3, 2.5, "go"]
    assert summarise(np.int64(7)) == 7 and type(summarise(np.int64(7))) is int
    assert summarise(np.float32(0.5)) == 0.5
    long = "a" * (MAX_STR + 5)
    assert summarise(long) == "a" * MAX_STR + "…(+5)"


def test_arrays_small_whole_large_as_stats() -> None:
    assert summarise(np.arange(SMALL_ARRAY)) == list(range(SMALL_ARRAY))
    image = np.zeros((7, 7, 3), np.uint8)
    image[3, 3, 0], image[0, 0, 2] = 10, 2
    assert summarise(image) == {"$array": {"shape": [7, 7, 3], "dtype": "uint8",
                                           "min": 0, "max": 10}}
    floats = np.linspace(-1.5, 2.0, 40).reshape(4, 10)
    stats = summarise(floats)["$array"]
    assert stats == {"shape": [4, 10], "dtype": "float64", "min": -1.5, "max": 2.0}
    assert type(stats["min"]) is float
    nan = np.array([1.0, np.nan] * 10)
    assert np.isnan(summarise(nan)["$array"]["min"])
    assert summarise(np.array(["a"] * 20)) == {"$array": {"shape": [20], "dtype": "<U1"}}
    assert summarise(np.zeros((0, 3))) == []
    assert summarise(np.zeros((20, 0), "U1")) == {"$array": {"shape": [20, 0], "dtype": "<U1"}}
    assert summarise(np.ones(20, bool))["$array"] == {"shape": [20], "dtype": "bool",
                                                      "min": True, "max": True}


def test_containers_cut_at_max_list_and_max_depth() -> None:
    assert summarise((1, [2, 3])) == [1, [2, 3]]
    many = list(range(MAX_LIST + 3))
    assert summarise(many) == list(range(MAX_LIST)) + [{"$more": 3}]
    assert summarise({1: "a"}) == {"1": "a"}
    deep = summarise(nested([1], MAX_DEPTH))
    assert at_depth(deep, MAX_DEPTH) == {"$object": "builtins.list"}
    assert at_depth(summarise(nested({}, MAX_DEPTH)), MAX_DEPTH) == {"$object": "builtins.dict"}
    # A list cut for its depth is still a list at the top afterwards.
    assert summarise([4, 5]) == [4, 5]
    assert summarise({"a": [1]}) == {"a": [1]}


def test_objects_that_are_no_data_and_the_types_that_look_alike() -> None:
    assert summarise(Handle()) == {"$object": f"{__name__}.Handle"}
    assert summarise({"sim": Handle()}) == {"sim": {"$object": f"{__name__}.Handle"}}
    assert summarise(Attrs()) == {"a": 1}
    assert summarise(OrderedDict(b=2)) == {"b": 2}

    class Count(int):
        pass

    class Text(str):
        pass

    assert summarise(Count(4)) == 4
    assert summarise(Text("x" * (MAX_STR + 1))) == "x" * MAX_STR + "…(+1)"
    # An object isinstance takes for a list is summarised as one, even after another
    # object of its type was none.
    assert summarise(Claims(claim=False)) == {"$object": f"{__name__}.Claims"}
    assert summarise(Claims(claim=True)) == [1, 2]


def test_frames_go_to_save_frame() -> None:
    pixels = np.zeros((4, 6, 3), np.uint8)
    assert summarise(Frame(pixels)) == {"$frame": None, "shape": [4, 6, 3]}
    saved: list[Any] = []

    def save(frame: Any) -> dict[str, Any]:
        saved.append(frame)
        return {"$frame": "x.png"}

    assert summarise({"frame": Frame(pixels)}, save) == {"frame": {"$frame": "x.png"}}
    atlas = TileAtlas((2, 2))
    tile = atlas.add(np.zeros((2, 2, 3), np.uint8))
    tiled = TiledFrame(atlas, np.full((3, 5), tile, np.uint16))
    assert summarise(tiled) == {"$frame": None, "shape": [6, 10, 3]}
    assert summarise([tiled], save) == [{"$frame": "x.png"}]
    assert saved[-1] is tiled and len(saved) == 2


def test_every_stand_in_is_json() -> None:
    value = {"obs": {"image": np.ones((7, 7, 3), np.uint8), "direction": 2, "mission": "go"},
             "sim": Handle(), "done": False, "reward": np.float32(0.5), "path": [(1, 2)]}
    assert orjson.loads(orjson.dumps(summarise(value))) == {
        "obs": {"image": {"$array": {"shape": [7, 7, 3], "dtype": "uint8", "min": 1,
                                     "max": 1}}, "direction": 2, "mission": "go"},
        "sim": {"$object": f"{__name__}.Handle"}, "done": False, "reward": 0.5,
        "path": [[1, 2]]}
