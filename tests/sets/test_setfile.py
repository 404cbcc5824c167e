"""The set file: expansion into keyed members, and refusals that name the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evaltui.cli import main
from evaltui.contract.setspec import SetFileError, parse_set_file
from evaltui.sets.expansion import expand, member_key
from evaltui.sets.plan import plan_file

BASE = {"dataset": "babyai", "episodes": 3, "workers": 1}


def grid(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "grid", "base": dict(BASE),
                            "matrix": {"graph": ["bot", "noisy_bot"],
                                       "split": ["GoToLocal", "GoToObjMaze"],
                                       "policy.noise": [0.0, 0.2]}}
    data.update(extra)
    return data


def test_members_are_the_product_in_file_order_with_stable_keys(
        set_file: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = set_file(grid(baseline={"graph": "bot", "split": "GoToLocal", "policy.noise": 0}))
    plan = plan_file(path)
    members = plan.expansion.members
    assert [tuple(m.axes.values()) for m in members][:3] == [
        ("bot", "GoToLocal", 0.0), ("bot", "GoToLocal", 0.2), ("bot", "GoToObjMaze", 0.0)]
    assert len(members) == 8 and len({m.key for m in members}) == 8
    assert plan.expansion.baseline is members[0]
    first = members[1].spec
    assert first["eval"]["selectors"] == {"policy.noise": 0.2}
    assert first["eval"]["split"] == "GoToLocal" and first["eval"]["episode_count"] == 3
    assert first["scheduling"]["set_id"] == "grid"
    # The key is the member's resolved spec, wherever the command runs from.
    monkeypatch.chdir(tmp_path.parent)
    again = plan_file(path, check=False).expansion.members
    assert [m.key for m in again] == [m.key for m in members]
    assert member_key(first) == members[1].key


def test_include_exclude_repeat_and_checkpoints(set_file: Callable[..., Path],
                                                tmp_path: Path) -> None:
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for step in (300, 100, 200):
        (ckpts / f"policy_{step:06d}.npz").write_bytes(b"x")
    data = {"name": "c", "base": {"graph": "model", "episodes": 2},
            "matrix": {"checkpoint": {"glob": "ckpts/*.npz"}, "split": ["GoToLocal", "GoTo"]},
            "exclude": [{"step": 200, "split": "GoTo"}],
            "include": [{"split": "GoToObjMaze"}]}
    exp = plan_file(set_file(data), check=False).expansion
    steps = [(m.axes.get("step"), m.axes.get("split")) for m in exp.members]
    assert steps == [(100, "GoToLocal"), (100, "GoTo"), (200, "GoToLocal"),
                     (300, "GoToLocal"), (300, "GoTo"), (None, "GoToObjMaze")]
    assert exp.members[0].spec["eval"]["selectors"]["policy.weights"] == \
        str((ckpts / "policy_000100.npz").resolve())
    rep = expand(parse_set_file({"name": "r", "base": {"graph": "bot"},
                                 "matrix": {"repeat": 3}}), tmp_path)
    assert [m.spec["eval"]["selectors"]["policy.seed"] for m in rep.members] == [0, 1, 2]


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("unknown axis", grid(matrix={"colour": [1, 2]}), "matrix.colour: unknown axis"),
    ("empty product", grid(matrix={"split": []}), "matrix.split: is empty"),
    ("param no node has", grid(matrix={"graph": ["bot"], "policy.bogus": [1]}),
     "matrix.policy.bogus: BabyAIBotPolicy takes no parameter 'bogus'"),
    ("nodeset no graph has", grid(matrix={"graph": ["bot"], "critic.depth": [1]}),
     "matrix.critic.depth: no nodeset or node named 'critic'"),
    ("glob matching nothing", {"name": "g", "base": {"graph": "model"},
                               "matrix": {"checkpoint": {"glob": "ckpts/*.npz"}}},
     "matrix.checkpoint.glob: 'ckpts/*.npz' matches no file"),
    ("baseline that is no member", grid(baseline={"graph": "model"}),
     "baseline: {graph: model} is no member of the set"),
    ("baseline matching several", grid(baseline={"graph": "bot"}),
     "baseline: {graph: bot} matches 4 members"),
    ("unknown base option", grid(base={"episode": 3}), "base.episode: Extra inputs"),
    ("unknown graph", grid(matrix={"graph": ["bot", "nope"]}),
     "matrix.graph: no such file and no built-in graph 'nope'"),
    ("unknown split", grid(matrix={"graph": ["bot"], "split": ["GoToNowhere"]}),
     "matrix.split: "),
    ("exclude matching nothing", grid(exclude=[{"graph": "model"}]),
     "exclude[0]: {graph: model} matches no member"),
    ("bad repeat", grid(matrix={"repeat": 0}), "matrix.repeat: must be a whole number"),
    ("bad name", grid(name="my set"), "name: 'my set' must be"),
    ("name with a trailing newline", grid(name="okname\n"), "name: 'okname\\n' must be"),
    ("absolute checkpoint glob", {"name": "g", "base": {"graph": "model"},
                                  "matrix": {"checkpoint": {"glob": "/etc/*.conf"}}},
     "matrix.checkpoint.glob: '/etc/*.conf' must be relative"),
    ("checkpoint glob climbing out", {"name": "g", "base": {"graph": "model"},
                                      "matrix": {"checkpoint": {"glob": "../outside/*.npz"}}},
     "matrix.checkpoint.glob: '../outside/*.npz' must be relative"),
]


@pytest.mark.parametrize(("case", "data", "expected"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_set_file_is_one_line_naming_the_field_and_writes_nothing(
        case: str, data: dict[str, Any], expected: str, set_file: Callable[..., Path],
        outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = set_file(data)
    assert main(["set", "run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and expected in err, err
    assert list(outputs.iterdir()) == []  # no set dir, no run dir


def test_a_checkpoint_linked_outside_its_directory_is_refused(
        set_file: Callable[..., Path], tmp_path: Path, outputs: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "proj").mkdir()
    path = set_file({"name": "g", "base": {"graph": "model"},
                     "matrix": {"checkpoint": {"glob": "ckpts/*.npz"}}}, name="proj/set.yaml")
    ckpts = path.parent / "ckpts"
    ckpts.mkdir()
    secret = tmp_path / "elsewhere" / "shadow"
    secret.parent.mkdir()
    secret.write_text("not a checkpoint")
    (ckpts / "policy_000100.npz").symlink_to(secret)
    assert main(["set", "run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "matrix.checkpoint.glob: policy_000100.npz is a link to" in err and "outside" in err
    assert list(outputs.iterdir()) == []


def test_parse_errors_name_the_field() -> None:
    with pytest.raises(SetFileError, match=r"^matrix\.checkpoint\.glob: Field required"):
        parse_set_file({"name": "x", "matrix": {"checkpoint": {"param": "policy.weights"}}})
    with pytest.raises(SetFileError, match=r"^base\.set\.noise: must look like NODESET.PARAM"):
        parse_set_file({"name": "x", "base": {"set": {"noise": 1}}})


def test_a_json_set_file_expands_like_yaml(tmp_path: Path) -> None:
    import json

    data = grid(exclude=[{"graph": "noisy_bot"}])
    (tmp_path / "grid.json").write_text(json.dumps(data))
    (tmp_path / "grid.yaml").write_text(__import__("yaml").safe_dump(data, sort_keys=False))
    from_json = plan_file(tmp_path / "grid.json", check=False).expansion.members
    from_yaml = plan_file(tmp_path / "grid.yaml", check=False).expansion.members
    assert [m.key for m in from_json] == [m.key for m in from_yaml] and len(from_json) == 4
    (tmp_path / "bad.json").write_text("{name: ")
    with pytest.raises(SetFileError, match=r"^<set file>: .*bad.json: not valid JSON"):
        plan_file(tmp_path / "bad.json")
