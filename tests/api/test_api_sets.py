"""``evaltui set run`` with ``$BACKEND_URL``: the members go to that backend's queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from apihelpers import Backend

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json


def test_set_run_submits_to_the_backend_at_backend_url(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BACKEND_URL", backend.url)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "remote", "base": {"graph": "bot", "episodes": 3},
                                    "matrix": {"policy.noise": [0.0, 0.5]}}))
    assert main(["set", "run", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert backend.url in err
    table = json.loads(out)
    assert [m["state"] for m in table["members"]] == ["done", "done"]
    for member in table["members"]:
        run = backend.scheduler.get_run(member["run_id"])  # the backend's own run
        assert run.state.value == "done"
        spec = read_json(run.run_dir / "spec.json")
        assert spec["scheduling"]["set_id"] == "remote"
        assert spec["eval"]["selectors"]["policy.noise"] == member["axes"]["policy.noise"]
