"""Themes are data: TOML files turned into Textual ``Theme`` objects.

The built-in ones live in the repository's top-level ``themes/`` folder (installed as
``evaltui._themes``); a user's own go in the config dir's ``themes/``
(``$EVALTUI_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/evaltui``, else
``~/.config/evaltui``) and then appear in ``--theme`` and the command palette. Each
file names a theme and its colours (Textual's ``Theme`` fields) plus an optional
``[variables]`` table. The screens' CSS only uses theme variables, so a new file
restyles everything without touching code. A broken user file is reported in one line
and skipped; a broken built-in one is a bug and raises.
"""

from __future__ import annotations

import tomllib
from dataclasses import fields
from importlib import resources
from pathlib import Path
from typing import Protocol

from textual.theme import Theme

from evaltui.contract.settings import settings

DEFAULT_THEME = "evaltui-dark"
_THEME_FIELDS = {f.name for f in fields(Theme)}
_NUMBER_FIELDS = {"luminosity_spread", "text_alpha"}
_COLOUR_FIELDS = _THEME_FIELDS - _NUMBER_FIELDS - {"name", "dark", "variables"}


class ThemeError(ValueError):
    """A theme file is not usable (the message names the file and the field)."""


class ThemeHost(Protocol):
    """What :func:`install_themes` needs of the app (Textual's ``App``)."""

    def register_theme(self, theme: Theme) -> None: ...


def builtin_themes_dir() -> Path:
    """The shipped themes: the top-level ``themes/`` folder, as package ``evaltui._themes``."""
    try:
        return Path(str(resources.files("evaltui._themes")))
    except ModuleNotFoundError:
        # Run from a source tree that was never installed (or installed before the
        # mapping existed): the folder itself, beside the evaltui package.
        return Path(__file__).resolve().parents[2] / "themes"


def user_themes_dir() -> Path:
    """Where a user's own theme files go: the config dir's ``themes/`` (may not exist)."""
    return settings().config_root() / "themes"


def load_theme(path: Path) -> Theme:
    """One TOML theme file as a Textual Theme (ThemeError, in one line, if unusable)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ThemeError(f"{path.name}: {_one_line(exc)}") from None
    unknown = set(data) - _THEME_FIELDS
    if unknown:
        raise ThemeError(f"{path.name}: unknown fields {sorted(unknown)}")
    data.setdefault("name", f"evaltui-{path.stem}")
    if "primary" not in data:
        raise ThemeError(f"{path.name}: 'primary' is required")
    wrong = sorted(k for k in data
                   if k in _COLOUR_FIELDS | {"name"} and not isinstance(data[k], str))
    wrong += sorted(k for k in data if k in _NUMBER_FIELDS
                    and (isinstance(data[k], bool) or not isinstance(data[k], int | float)))
    if "dark" in data and not isinstance(data["dark"], bool):
        wrong.append("dark")
    if wrong:
        raise ThemeError(f"{path.name}: wrong type for {wrong} (colours and name are strings, "
                         "dark is true/false)")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ThemeError(f"{path.name}: [variables] must map names to strings")
    theme = Theme(**data)
    try:
        theme.to_color_system().generate()  # parses every colour, so a typo fails here
    except Exception as exc:  # Textual raises its own parse errors; any is a bad file
        raise ThemeError(f"{path.name}: {_one_line(exc)}") from None
    return theme


def load_themes(directory: Path | None = None) -> list[Theme]:
    """Every ``*.toml`` theme in ``directory`` (default: the built-in ones), by file name."""
    directory = directory or builtin_themes_dir()
    return [load_theme(p) for p in sorted(directory.glob("*.toml"))]


def load_user_themes(directory: Path | None = None) -> tuple[list[Theme], list[str]]:
    """The user's themes that load, and one line per file that does not."""
    directory = directory or user_themes_dir()
    themes: list[Theme] = []
    problems: list[str] = []
    for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        try:
            themes.append(load_theme(path))
        except ThemeError as exc:
            problems.append(f"theme file {path.parent}/{exc} (skipped)")
    return themes, problems


def install_themes(app: ThemeHost) -> list[str]:
    """Register the built-in themes, then the user's (a user file may restyle a built-in
    name); returns one line per user theme file that was skipped."""
    themes, problems = load_user_themes()
    for theme in [*load_themes(), *themes]:
        app.register_theme(theme)
    return problems


def resolve_theme_name(name: str, available: set[str] | dict[str, Theme],
                       problems: list[str] | None = None) -> str:
    """``dark`` → ``evaltui-dark``; any registered Textual theme name passes through.

    Raises ThemeError listing the choices (and the theme files that did not load) if
    ``name`` is neither.
    """
    for candidate in (name, f"evaltui-{name}"):
        if candidate in available:
            return candidate
    choices = ", ".join(sorted(available))
    skipped = f" ({'; '.join(problems)})" if problems else ""
    raise ThemeError(f"unknown theme {name!r}; choose one of: {choices}{skipped}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
