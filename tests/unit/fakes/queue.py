"""The ingest queue (dfd.reconcile.ports.IngestQueue) in memory, and a whole reconcile run in this process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dfd.reconcile.service import Reconciler


@dataclass
class FakeIngestQueue:
    """The ingest queue (dfd.reconcile.ports.IngestQueue): the bodies sent, in order."""

    bodies: list[str] = field(default_factory=list)

    def send(self, body: str) -> None:
        self.bodies.append(body)


def run_reconcile(reconciler: Reconciler, **given: Any) -> dict[str, Any]:
    """A whole reconcile run in this process, as the workflow drives it (begin, every page of every phase,
    finish): its summary (or its "skipped" answer)."""
    state = reconciler.begin(given)
    if "skipped" in state:
        return state
    while state["pos"]["phase"] != "done":
        state = reconciler.page(state["pos"]["phase"], state, lambda *_: None)
    return reconciler.finish(state)
