"""Strings that came from a client, made safe to echo in a response and to write into a log line.

Two faults of echoing input as it came: no bound (a 4.8 MB body of unknown field names became a
6.8 MB response, over Lambda's 6 MB limit, and a 2.8 MB log line), and unpaired surrogates (``"\\ud800"`` is a valid
JSON string escape, so ``json.loads`` yields a lone surrogate that no UTF-8 writer accepts: the logger failed and the
400 was never logged). :func:`echo` fixes both for one string.
"""

from __future__ import annotations

ECHO_CHARS = 64  # characters of one client string echoed back
ECHO_ITEMS = 5  # client strings echoed back in one answer


def printable(text: str) -> str:
    """`text` with every unpaired surrogate written as its escape (``\\ud800``): encodable as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """A client string fit to echo: cut at `limit` characters (marked with "…"), unpaired surrogates escaped."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return printable(cut)


def echo_list(texts: list[str], *, items: int = ECHO_ITEMS, limit: int = ECHO_CHARS) -> list[str]:
    """At most `items` client strings, each :func:`echo`-ed."""
    return [echo(text, limit) for text in texts[:items]]
