"""The shell blocks of a Markdown file, as the README test runs them.

A shell block is a fenced block whose info string is ``bash``, ``sh`` or ``shell`` (indented fences inside list
items included). Two kinds are told apart, and nothing else is:

- a block that starts the local stack (a command line beginning with ``make run``, after optional variable
  assignments) is what a reader runs in a terminal of its own: the test runs it as written, in the background,
  until the next such block or the end;
- a block preceded by the HTML comment ``<!-- needs AWS: REASON -->`` is skipped, with that reason.

Every other block runs as written, in order, in one shell session per stack (variables and files carry over as
in a reader's terminal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SHELLS = frozenset({"bash", "sh", "shell"})
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[\w+-]*)\s*$")
NEEDS_AWS = re.compile(r"^\s*<!--\s*needs AWS:\s*(?P<reason>.*?)\s*-->\s*$")
ANY_MARKER = re.compile(r"^\s*<!--.*-->\s*$")
STARTS_STACK = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*make run\b")


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the block's first command in the Markdown file
    text: str
    skip_reason: str | None  # "needs AWS: ..." when marked

    @property
    def starts_stack(self) -> bool:
        return any(STARTS_STACK.match(command.strip()) for command in self.text.splitlines())


class MarkdownError(ValueError):
    """A marker that is not the one kind of skip this runner allows, or an unclosed fence."""


def shell_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].lower()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if end == len(lines):
            raise MarkdownError(f"{path.name}:{index + 1}: unclosed code fence")
        if info in SHELLS:
            body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
            blocks.append(Block(index + 2, "\n".join(body) + "\n", _marker(path, lines, index)))
        index = end + 1
    return blocks


def _marker(path: Path, lines: list[str], fence_index: int) -> str | None:
    """The skip reason of the comment right above the fence (blank lines between allowed), if any."""
    above = fence_index - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    if above < 0 or not ANY_MARKER.match(lines[above]):
        return None
    marked = NEEDS_AWS.match(lines[above])
    if marked is None:
        # another comment right above a shell block is not a skip: say so rather than run a block silently
        # the author meant to exclude
        if "skip" in lines[above].lower():
            raise MarkdownError(f"{path.name}:{above + 1}: the only skip is `<!-- needs AWS: REASON -->`")
        return None
    if not marked["reason"]:
        raise MarkdownError(f"{path.name}:{above + 1}: `needs AWS:` must give its reason")
    return f"needs AWS: {marked['reason']}"


def session_script(blocks: list[Block], source: str) -> str:
    """One bash script running ``blocks`` in order: strict mode, and on the first failing command its README line.

    Line 2 maps the script's line numbers to lines of ``source``, so that the ERR trap's $LINENO names the
    Markdown line of the command that failed.
    """
    header = 3
    body: list[str] = []
    where: dict[int, str] = {}
    for block in blocks:
        body.append(f"echo '### {source}:{block.line}' >&2")
        for offset, command in enumerate(block.text.splitlines()):
            body.append(command)
            where[header + len(body)] = f"{source}:{block.line + offset}"
    mapping = " ".join(f"[{number}]='{place}'" for number, place in where.items())
    lines = [
        "set -Eeuo pipefail",
        f"declare -A __readme_lines=({mapping})",
        "trap 'echo \"README FAILED at ${__readme_lines[$LINENO]:-line $LINENO} (exit $?): $BASH_COMMAND\" >&2' ERR",
        *body,
    ]
    return "\n".join(lines) + "\n"
