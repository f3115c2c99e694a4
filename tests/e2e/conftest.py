"""The local stack for end-to-end tests: ``python -m dfdlocal`` in a subprocess, on free ports.

A subprocess, not in-process: the stack points os.environ (AWS_ENDPOINT_URL, credentials, DDB_TABLE...) at
itself and imports the handlers with those settings cached, which would leak into the unit/integration tests
sharing this pytest process (and moto's in-process mocks would intercept the stack's own calls).
Teardown sends SIGINT, as Ctrl-C does, and expects a clean exit 0.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.e2e.browser_support import CHROMIUM_ARGS, browser_unavailable, find_chromium
from tests.e2e.e2e_helpers import ROOT, RunningStack, clean_env, launch_stack, stop_stack
from tests.e2e.openapi_check import validating_responses


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    workdir = tmp_path_factory.mktemp("dfdlocal")
    command = [sys.executable, "-m", "dfdlocal", "--host", "127.0.0.1", "--api-port", "0", "--lambda-port", "0"]
    command += ["--aws-port", "0", "--ready-file", str(workdir / "ready.json")]
    running = launch_stack(command, cwd=ROOT, env=clean_env(), workdir=workdir)
    # every API response the e2e tests receive is checked against docs/openapi.yaml
    with validating_responses(running.api_url) as checker:
        yield running
    stop_stack(running)
    if checker.failures:
        pytest.fail(f"{len(checker.failures)} API response(s) broke docs/openapi.yaml:\n" + "\n".join(checker.failures))


# Module scope: Playwright's sync API marks its event loop as running in the main thread for as long as it is
# open, so no test after a module's browser tests finds a running loop.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = find_chromium()
    if executable is None:
        browser_unavailable("no Chromium found (DFD_CHROMIUM, chromium on PATH, /usr/bin/chromium)")
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        except Exception as exc:  # a broken install is as unavailable as a missing one
            browser_unavailable(f"Chromium at {executable} could not be started: {exc}")
        yield launched
        launched.close()
