"""pyproject lists every package (the list is explicit so themes/ can map to evaltui._themes)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_under_evaltui_is_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(d.relative_to(ROOT).parts) for d in (ROOT / "evaltui").rglob("*")
             if d.is_dir() and any(d.glob("*.py"))} | {"evaltui"}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert config["package-dir"]["evaltui._themes"] == "themes"
    assert (ROOT / "themes" / "__init__.py").is_file()  # the editable finder needs a package
    assert "*.toml" in config["package-data"]["evaltui._themes"]
