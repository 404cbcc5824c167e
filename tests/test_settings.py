"""The settings class: every variable, blank-means-unset, and re-reading a changed env."""

from __future__ import annotations

from pathlib import Path

import pytest

import evaltui.contract.settings
from evaltui.contract.settings import Settings, env_names, settings


def test_every_field_has_a_docstring_naming_its_variable():
    source = Path(evaltui.contract.settings.__file__).read_text()
    for name in env_names():
        assert f'"""``{name}``' in source, name
    assert len(env_names()) == len(Settings.model_fields)


def test_settings_follow_monkeypatched_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(tmp_path / "a"))
    assert settings().outputs == str(tmp_path / "a")
    first = settings()
    assert settings() is first  # unchanged env: the cached instance
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(tmp_path / "b"))
    assert settings().outputs == str(tmp_path / "b")


def test_blank_is_unset_but_empty_cuda_visible_devices_is_kept(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EVALTUI_TOKEN", "   ")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("BACKEND_URL", "http://h:1")
    current = settings()
    assert current.token is None
    assert current.cuda_visible_devices == ""
    assert current.backend_url == "http://h:1"


def test_config_root_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("EVALTUI_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert settings().config_root() == tmp_path / "xdg" / "evaltui"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    assert settings().config_root() == Path.home() / ".config" / "evaltui"
    monkeypatch.setenv("EVALTUI_CONFIG_DIR", str(tmp_path / "cfg"))
    assert settings().config_root() == tmp_path / "cfg"
