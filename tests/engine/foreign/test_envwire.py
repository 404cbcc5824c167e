"""The wire to a nodeset's own environment: values cross exactly, nothing is pickled,
and the code that runs over there is Python 3.8."""

from __future__ import annotations

import ast
import math
import os
from pathlib import Path

import numpy as np
import pytest

from evaltui.engine import nodes, usererrors
from evaltui.engine.foreign import boot, envhost, envwire
from evaltui.engine.foreign.envwire import decode, encode, recv, send
from evaltui.engine.nodes import Frame, Trajectory


def roundtrip(value: object) -> object:
    parts = encode(value)
    frame = b"".join(bytes(memoryview(p)) for p in parts)
    return decode(bytearray(frame[8:]))


@pytest.mark.parametrize("dtype", ["uint8", "int64", "float32", "float64", "bool", "<U7",
                                   ">i4", "complex64"])
def test_arrays_cross_as_dtype_shape_and_bytes(dtype: str) -> None:
    arr = (np.arange(24) % 5).astype(dtype).reshape(2, 3, 4)
    out = roundtrip({"a": arr, "t": arr[:, ::2].T})  # a non-contiguous view too
    assert out["a"].dtype == arr.dtype and out["a"].shape == arr.shape
    assert np.array_equal(out["a"], arr) and np.array_equal(out["t"], arr[:, ::2].T)
    assert out["a"].flags.writeable  # a node may write into what it got, as in-process


def test_scalars_keep_their_numpy_type_and_floats_their_bits() -> None:
    value = {"f32": np.float32(0.1), "i64": np.int64(-3), "b": np.bool_(True),
             "py": 0.1 + 0.2, "nan": math.nan, "inf": -math.inf, "big": 2**70}
    out = roundtrip(value)
    assert type(out["f32"]) is np.float32 and out["f32"] == np.float32(0.1)
    assert type(out["i64"]) is np.int64 and type(out["b"]) is np.bool_
    assert out["py"] == 0.1 + 0.2 and math.isnan(out["nan"]) and out["inf"] == -math.inf
    assert out["big"] == 2**70


def test_containers_frames_and_trajectories_come_back_as_they_left() -> None:
    pixels = np.full((4, 5, 3), 7, dtype=np.uint8)
    value = {"tuple": (1, (2.5, "x")), "keys": {1: "one", (2, 3): [None, b"\x00\xff"]},
             "~tilde": 1, "frame": Frame(pixels), "empty": np.zeros((0, 3))}
    out = roundtrip(value)
    assert out["tuple"] == (1, (2.5, "x"))
    assert out["keys"] == {1: "one", (2, 3): [None, b"\x00\xff"]}
    assert out["~tilde"] == 1 and isinstance(out["frame"], Frame)
    assert np.array_equal(out["frame"].pixels, pixels) and out["empty"].shape == (0, 3)
    traj = Trajectory(positions=[(0.0, 1.5), (2.0, 3.0)], success=True, nav_error=0.25,
                      extra={"steps": 3.0})
    assert roundtrip(traj) == traj


@pytest.mark.parametrize("value", [object(), np.array([object()]), {1.5j}])
def test_what_cannot_cross_is_refused_by_name(value: object) -> None:
    with pytest.raises(TypeError, match="across the environment boundary"):
        encode(value)


def test_a_large_message_crosses_a_pipe_whole() -> None:
    r, w = os.pipe()
    image = np.random.default_rng(0).integers(0, 255, (224, 224, 3), dtype=np.uint8)
    pid = os.fork()
    if pid == 0:  # the writer: a frame larger than the pipe's buffer
        os.close(r)
        send(w, {"image": image})
        os._exit(0)
    os.close(w)
    try:
        assert np.array_equal(recv(r)["image"], image)
        with pytest.raises(envwire.WireClosed):
            recv(r)
    finally:
        os.close(r)
        os.waitpid(pid, 0)


def test_the_code_that_runs_in_the_other_environment_is_python_3_8() -> None:
    for module in (nodes, usererrors, envwire, envhost):
        source = Path(str(module.__file__)).read_text()
        ast.parse(source, filename=str(module.__file__), feature_version=(3, 8))
    ast.parse(boot.BOOTSTRAP, feature_version=(3, 8))
    assert set(boot.SHIPPED) == {nodes, usererrors, envwire, envhost}


def test_the_shipped_modules_import_only_the_stdlib_and_each_other() -> None:
    shipped = {m.__name__ for m in boot.SHIPPED}
    for module in boot.SHIPPED:
        tree = ast.parse(Path(str(module.__file__)).read_text())
        for stmt in ast.walk(tree):
            names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else \
                [stmt.module or ""] if isinstance(stmt, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                assert name in shipped or top != "evaltui" and top in _stdlib(), \
                    f"{module.__name__} imports {name}"


def _stdlib() -> frozenset[str]:
    import sys

    return frozenset(sys.stdlib_module_names) | {"__future__", "numpy"}  # numpy: lazily


def test_the_shipped_modules_use_no_3_9_plus_runtime_forms() -> None:
    """3.8 *syntax* is not enough: ``isinstance(x, A | B)`` and ``list[int]`` outside an
    annotation parse on 3.8 but fail when run there."""
    generics = {"list", "dict", "tuple", "set", "frozenset", "type"}
    for module in boot.SHIPPED:
        tree = ast.parse(Path(str(module.__file__)).read_text())
        in_annotations = set()
        for node in ast.walk(tree):
            for ann in _annotations(node):
                in_annotations.update(id(n) for n in ast.walk(ann))
        for node in ast.walk(tree):
            if id(node) in in_annotations:
                continue
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                    "isinstance", "issubclass") and len(node.args) == 2:
                assert not isinstance(node.args[1], ast.BinOp), \
                    f"{module.__name__}:{node.lineno}: isinstance with X | Y"
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                assert node.value.id not in generics, \
                    f"{module.__name__}:{node.lineno}: {node.value.id}[...] at runtime"


def _annotations(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    if isinstance(node, ast.arg) and node.annotation is not None:
        return [node.annotation]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
        return [node.returns]
    return []
