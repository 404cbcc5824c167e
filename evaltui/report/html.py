"""Small HTML pieces shared by the report's pages: the page shell, numbers, definition lists.

Every page links the one stylesheet and the one script under the site's ``assets/`` by a
relative path, so the site works from ``file://`` wherever it is copied; nothing refers
to the network.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from html import escape
from typing import Any

import orjson

ASSETS_DIR = "assets"
CSS_NAME = "report.css"
JS_NAME = "report.js"


def esc(value: Any) -> str:
    return escape("" if value is None else str(value))


def page(title: str, body: str, *, root: str, data_scripts: Iterable[str] = ()) -> str:
    """A whole HTML page; ``root`` is the relative path from the page to the site root
    (``""`` or ``"../"``); ``data_scripts`` load before the site's script."""
    scripts = "".join(f'<script src="{esc(src)}"></script>\n' for src in data_scripts)
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n"
            f'<link rel="stylesheet" href="{root}{ASSETS_DIR}/{CSS_NAME}">\n'
            "</head>\n<body>\n"
            f"{body}\n{scripts}"
            f'<script src="{root}{ASSETS_DIR}/{JS_NAME}"></script>\n</body>\n</html>\n')


def number(value: Any, digits: int = 4) -> str:
    """A shown number: ``digits`` decimals for floats, as is for integers, "-" if none."""
    if isinstance(value, bool) or value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}" if math.isfinite(value) else "-"
    return esc(value)


def value_attr(value: Any) -> str:
    """The exact value of a shown number, for ``data-value`` (tests and scripts read it)."""
    return esc(repr(float(value))) if isinstance(value, int | float) else ""


def definition_list(items: Iterable[tuple[str, Any]], css: str) -> str:
    """``<dl>`` of the items whose value is not None, each ``<div data-key=...>``."""
    rows = "".join(f'<div data-key="{esc(k)}"><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>'
                   for k, v in items if v is not None)
    return f'<dl class="{css}">{rows}</dl>'


def js_data(name: str, data: Any) -> bytes:
    """A script that sets ``window[name]`` to ``data``: how a page reads its data from
    ``file://`` (Chromium forbids fetch() and XHR there, but loads a <script src>)."""
    return b"window." + name.encode() + b" = " + orjson.dumps(
        data, option=orjson.OPT_SERIALIZE_NUMPY) + b";\n"


def when(value: Any) -> str | None:
    """An ISO 8601 time as ``YYYY-mm-dd HH:MM:SS`` (as written: local to the run's machine)."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value
