"""The Lambda entry points, one module per function (template.yaml's `Handler`); importing one is that
function's init.

Init builds tens of thousands of objects that live as long as the process (botocore and its clients, Powertools,
dfd), and every garbage collection during init and the first request walks all of them again (what that costs a
cold start: docs/performance.md, target 7), so the collector is paused while a handler module loads, and
`init_done()`, the last statement of every handler module, builds what the function's first request needs (its
service and AWS clients: AWS's advice is SDK clients at init, not per request), freezes everything init built
(`gc.freeze()`: moved to the permanent generation, never walked again) and resumes collection. The running
function collects as usual. (A handler module whose import fails leaves collection paused; its function cannot
run anyway: Lambda reports the init error.)

Before any handler module, dfd.lazyinit defers the `__init__` of two Powertools packages that import far more
than a function uses (their submodules are imported as needed).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import dfd.lazyinit  # noqa: F401 (deferring Powertools' package inits, before any handler imports them)

if TYPE_CHECKING:
    from dfd.core.errors import BadRequest

gc.disable()


def init_done(*build: Callable[[], object]) -> None:
    """End of a function's init: call `build` (dfd.deps factories, dfd.adapters.aws clients' `build`), freeze what init
    built, collect garbage as usual from now on."""
    try:
        for step in build:
            step()
    finally:
        gc.freeze()
        gc.enable()


def workflow_event_key(event: object, refused: type[BadRequest]) -> str:
    """The event key a workflow's payload names (`{"event_key": ...}`, 1 to 2,048 characters); `refused` (raised)
    when it names none: the payload is not the workflow's."""
    key = event.get("event_key") if isinstance(event, Mapping) else None
    if not isinstance(key, str) or not key or len(key) > 2048:
        raise refused("the payload names no event key")
    return key
