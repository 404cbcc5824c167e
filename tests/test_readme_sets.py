"""The README's first set runs what it seems to (issue 35, item 12): its members differ
in what they run (``policy.noise`` over ``noisy_bot``'s own noise made two graphs one
policy, identical rows), and the docs say every metric a failure zeroes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from evaltui.sets.plan import plan_file

ROOT = Path(__file__).resolve().parents[1]


def readme_set(tmp_path: Path) -> Path:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```yaml\n# noise.yaml\n(.*?)```", text, re.S)
    assert block is not None, "the README's set example"
    path = tmp_path / "noise.yaml"
    path.write_text(block.group(1))
    return path


def effective(spec: dict) -> str:
    """What a member runs: its nodesets with the selectors' params applied, and its data."""
    nodesets = json.loads(json.dumps(spec["graph"]["nodesets"]))
    ev = dict(spec.get("eval") or {})
    for key, value in (ev.pop("selectors", None) or {}).items():
        nodeset, _, param = key.partition(".")
        nodesets[nodeset].setdefault("params", {})[param] = value
    ev.pop("episode_count", None)
    return json.dumps([nodesets, ev, spec.get("dataset")], sort_keys=True)


def test_the_readme_set_members_each_run_something_else(tmp_path: Path) -> None:
    path = readme_set(tmp_path)
    plan = plan_file(path, tmp_path / "outputs")
    members = plan.expansion.members
    assert len(members) >= 4
    runs = [effective(m.spec) for m in members]
    assert len(set(runs)) == len(runs), "two members of the README's set run the same thing"
    count = len(members)
    assert f"submits the {count} members" in (ROOT / "README.md").read_text()
    assert yaml.safe_load(path.read_text())["baseline"]


def test_the_docs_say_a_failure_zeroes_ndtw_too() -> None:
    for doc in ("README.md", "docs/own-env.md"):
        text = " ".join((ROOT / doc).read_text().split())
        assert "SPL, nDTW and SDTW 0" in text, doc
        assert "SPL and SDTW 0" not in text, doc
