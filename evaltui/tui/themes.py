"""Themes are data: ``evaltui/themes/*.toml`` files turned into Textual ``Theme`` objects.

Each file names a theme and its colours (Textual's ``Theme`` fields) plus an optional
``[variables]`` table. The screens' CSS only uses theme variables, so a new file
restyles everything without touching code.
"""

from __future__ import annotations

import tomllib
from dataclasses import fields
from importlib import resources
from pathlib import Path

from textual.theme import Theme

DEFAULT_THEME = "evaltui-dark"
_THEME_FIELDS = {f.name for f in fields(Theme)}


class ThemeError(ValueError):
    """A theme file is not usable (the message names the file and the field)."""


def themes_dir() -> Path:
    """The themes shipped inside the package (also in the wheel)."""
    return Path(str(resources.files("evaltui") / "themes"))


def load_theme(path: Path) -> Theme:
    """One TOML theme file as a Textual Theme."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ThemeError(f"{path.name}: {exc}") from None
    unknown = set(data) - _THEME_FIELDS
    if unknown:
        raise ThemeError(f"{path.name}: unknown fields {sorted(unknown)}")
    data.setdefault("name", f"evaltui-{path.stem}")
    if "primary" not in data:
        raise ThemeError(f"{path.name}: 'primary' is required")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ThemeError(f"{path.name}: [variables] must map names to strings")
    return Theme(**data)


def load_themes(directory: Path | None = None) -> list[Theme]:
    """Every ``*.toml`` theme in ``directory`` (default: the shipped ones), by file name."""
    directory = directory or themes_dir()
    return [load_theme(p) for p in sorted(directory.glob("*.toml"))]


def resolve_theme_name(name: str, available: set[str] | dict[str, Theme]) -> str:
    """``dark`` → ``evaltui-dark``; any registered Textual theme name passes through.

    Raises ThemeError listing the choices if ``name`` is neither.
    """
    for candidate in (name, f"evaltui-{name}"):
        if candidate in available:
            return candidate
    choices = ", ".join(sorted(available))
    raise ThemeError(f"unknown theme {name!r}; choose one of: {choices}")
