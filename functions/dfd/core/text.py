"""Strings that came from a client, made safe to echo in a response and to write into a log line.

What is echoed is bounded (a body of many unknown field names never makes a response over Lambda's 6 MB limit,
nor a log line as large), holds no unpaired surrogate (``"\\ud800"`` is a valid JSON string escape, so
``json.loads`` yields a lone surrogate that no UTF-8 writer accepts), and no control character (a field name
holding ESC sequences or a newline, shown as sent by a client that prints the message, or a log viewer).
:func:`echo` holds all three for one string; :func:`refuse_unknown` is the one answer to unknown fields of a JSON
body.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from dfd.core.errors import ValidationFailed

ECHO_CHARS = 64  # characters of one client string echoed back
ECHO_ITEMS = 5  # client strings echoed back in one answer


def printable(text: str) -> str:
    """`text` with every character that is not printable written as its escape: an unpaired surrogate
    (``\\ud800``: encodable as UTF-8), a control or format character (``\\x1b``, ``\\n``, ``\\u202e``), a
    separator other than the space."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """A client string fit to echo: cut at `limit` characters (marked with "…"), unpaired surrogates escaped."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return printable(cut)


def echo_list(texts: list[str], *, items: int = ECHO_ITEMS, limit: int = ECHO_CHARS) -> list[str]:
    """At most `items` client strings, each :func:`echo`-ed."""
    return [echo(text, limit) for text in texts[:items]]


def refuse_unknown(body: Mapping[str, Any], fields: Collection[str]) -> None:
    """ValidationFailed (400) when `body` has fields beyond `fields`: how many, and the first few names (sorted)
    :func:`echo_list`-ed — bounded and printable however many and whatever they are."""
    unknown = sorted(set(body) - set(fields))
    if not unknown:
        return
    shown = echo_list(unknown)
    more = f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else ""
    raise ValidationFailed(
        f"{len(unknown)} unknown field(s): {', '.join(shown)}{more}",
        details={"fields": shown, "count": len(unknown)},
    )


def binary_size(size: int) -> str:
    """`size` bytes in the largest binary unit it reaches, to 3 significant digits: 180 GiB, 48.8 TiB, 5 MiB."""
    if size < 1024:
        return "1 byte" if size == 1 else f"{size} bytes"
    value, unit = float(size), "bytes"
    for name in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            break
        value, unit = value / 1024, name
    return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
