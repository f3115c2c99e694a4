"""The README and the documentation site are executable: every shell block of README.md and of every page under
docs/ runs as written against a local stack, page by page, and the first command that fails fails the page's
test with its file and line.

How the blocks run (tests/e2e/readme_blocks.py parses them):
- in a temporary directory holding links to the checkout's top-level entries, so relative paths (``scripts/``,
  ``events/``, ``make``) work and every file a block writes lands outside the repository;
- one ``bash`` session per stack, per document, ``set -Eeuo pipefail``: variables and files carry over between
  a page's blocks as in a reader's terminal (each page starts with the block that sets what its others use);
- a block starting the stack (``make run ...``) runs as written, in the background, on free ports given through
  ``DFD_API_PORT``/``DFD_AWS_PORT``/``DFD_LAMBDA_PORT`` (the variables the README tells readers to export for a
  stack on other ports); blocks before the first one run against the session's stack fixture;
- blocks marked ``<!-- needs AWS: REASON -->`` are skipped, with their reason in the test's output.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.e2e_helpers import ROOT, RunningStack, clean_env, launch_stack, stop_stack
from tests.e2e.readme_blocks import Block, session_script, shell_blocks

pytestmark = pytest.mark.e2e

README = ROOT / "README.md"
SCRIPT_TIMEOUT = 900.0


def documents() -> list[Path]:
    """README.md, then every page of the site that has a shell block (pages included from README have none)."""
    pages = sorted(path for path in (ROOT / "docs").rglob("*.md") if shell_blocks(path))
    return [README, *pages]


@dataclass
class Segment:
    """The blocks run against one stack: the one ``starter`` starts, or the stack fixture when it is None."""

    starter: Block | None
    blocks: list[Block] = field(default_factory=list)


def segments(blocks: list[Block]) -> list[Segment]:
    out = [Segment(None)]
    for block in blocks:
        if block.skip_reason is not None:
            continue
        if block.starts_stack:
            out.append(Segment(block))
        else:
            out[-1].blocks.append(block)
    return [segment for segment in out if segment.starter is not None or segment.blocks]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def checkout_links(workdir: Path) -> None:
    """workdir links every top-level entry of the checkout (the virtualenvs included, git's own data not)."""
    for entry in ROOT.iterdir():
        if entry.name == ".git" or (entry.name.startswith(".") and not entry.name.startswith(".venv")):
            continue
        (workdir / entry.name).symlink_to(entry)


def session_env(workdir: Path, ports: dict[str, int]) -> dict[str, str]:
    env = clean_env()
    # the project's interpreter and tools first (python3 with the project installed, the AWS CLI when it is
    # installed by the Makefile rather than on the machine)
    paths = [str(ROOT / ".venv" / "bin")]
    if shutil.which("aws") is None:
        paths.append(str(ROOT / ".venv-aws" / "bin"))
    env["PATH"] = os.pathsep.join([*paths, env.get("PATH", "")])
    env["XDG_CACHE_HOME"] = str(workdir / ".cache")  # scripts/upload's resume state
    env["TMPDIR"] = str(workdir / ".tmp")
    (workdir / ".tmp").mkdir(exist_ok=True)
    # git's global settings (`git lfs install` writes them) stay in the scratch directory; the identity stands in
    # for the reader's own, which a fresh CI machine lacks
    env["HOME"] = str(workdir / ".home")
    (workdir / ".home").mkdir(exist_ok=True)
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"], env[f"GIT_{role}_EMAIL"] = "README reader", "reader@example.com"
    env.update({name: str(port) for name, port in ports.items()})
    return env


def ports_of(stack: RunningStack) -> dict[str, int]:
    return {
        "DFD_API_PORT": int(stack.api_url.rsplit(":", 1)[1]),
        "DFD_AWS_PORT": int(stack.aws_url.rsplit(":", 1)[1]),
        "DFD_LAMBDA_PORT": int(stack.lambda_url.rsplit(":", 1)[1]),
    }


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    checkout_links(tmp_path)
    yield tmp_path


@pytest.mark.parametrize("document", [str(path.relative_to(ROOT)) for path in documents()])
def test_every_shell_block_runs_as_written(
    document: str, workdir: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = shell_blocks(ROOT / document)
    assert blocks, f"{document} has no shell blocks"
    before = checkout_status()
    skipped = [block for block in blocks if block.skip_reason is not None]
    with capsys.disabled():
        for block in skipped:
            print(f"\n{document}:{block.line}: skipped, {block.skip_reason}", file=sys.stderr)
    runnable = segments(blocks)
    if not runnable:
        pytest.skip(f"every block of {document} needs AWS")
    for number, segment in enumerate(runnable):
        if segment.starter is None:
            fixture: RunningStack = request.getfixturevalue("stack")
            run_segment(segment, workdir, session_env(workdir, ports_of(fixture)), fixture, number, document)
            continue
        ports = {"DFD_API_PORT": free_port(), "DFD_AWS_PORT": free_port(), "DFD_LAMBDA_PORT": free_port()}
        env = session_env(workdir, ports)
        stack_dir = workdir / f".stack-{number}"
        stack_dir.mkdir()
        starter = ["bash", "-Eeuo", "pipefail", "-c", segment.starter.text]
        running = launch_stack(
            starter, cwd=workdir, env=env | {"DFD_READY_FILE": str(stack_dir / "ready.json")}, workdir=stack_dir
        )
        try:
            run_segment(segment, workdir, env, running, number, document)
        finally:
            # make passes Ctrl-C on by dying of it once the stack has exited 0
            stop_stack(running, ok=(0, 130, -signal.SIGINT))
    assert checkout_status() == before, f"the blocks of {document} wrote into the repository"


def checkout_status() -> str:
    """git's view of the checkout (untracked files included; ignored ones, like .venv, not)."""
    result = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True
    )
    return result.stdout if result.returncode == 0 else ""  # not a git checkout: nothing to compare


def run_segment(
    segment: Segment, workdir: Path, env: dict[str, str], stack: RunningStack, number: int, document: str
) -> None:
    script = workdir / f".readme-{number}.sh"
    script.write_text(session_script(segment.blocks, document))
    try:
        result = subprocess.run(
            ["bash", str(script)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
        )
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(f"{document}'s blocks did not finish in {SCRIPT_TIMEOUT} s:\n{_tail(str(timeout.stderr or ''))}")
    if result.returncode != 0:
        pytest.fail(
            f"{document}: a block failed (exit {result.returncode}):\n--- stderr\n{_tail(result.stderr)}\n"
            f"--- stdout\n{_tail(result.stdout)}\n--- stack log\n{stack.logs(40)}"
        )


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def test_the_block_parser_knows_the_two_kinds_and_refuses_other_skips(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "intro\n\n```bash\necho one\n```\n\n<!-- needs AWS: a real CloudFront distribution -->\n"
        "```sh\nsam deploy\n```\n"
        "\n1. step\n\n   ```sh\n   DFD_X=1 make run RUN_ARGS='--help'\n   ```\n\n```json\n{}\n```\n"
    )
    blocks = shell_blocks(doc)
    assert [(b.line, b.text, b.skip_reason, b.starts_stack) for b in blocks] == [
        (4, "echo one\n", None, False),
        (9, "sam deploy\n", "needs AWS: a real CloudFront distribution", False),
        (15, "DFD_X=1 make run RUN_ARGS='--help'\n", None, True),
    ]
    doc.write_text("<!-- skip: flaky -->\n```bash\nfalse\n```\n")
    with pytest.raises(ValueError, match="the only skip"):
        shell_blocks(doc)
    doc.write_text("<!-- needs AWS: -->\n```bash\nfalse\n```\n")
    with pytest.raises(ValueError, match="reason"):
        shell_blocks(doc)


def test_the_session_script_stops_at_the_first_failing_command_and_names_its_line(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\nA=1\n```\n\ntext\n\n```bash\necho $A > seen\nfalse | cat\necho never > after\n```\n")
    script = tmp_path / "run.sh"
    script.write_text(session_script(shell_blocks(doc), "doc.md"))
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "README FAILED at doc.md:9" in result.stderr
    assert (tmp_path / "seen").read_text() == "1\n"
    assert not (tmp_path / "after").exists()
