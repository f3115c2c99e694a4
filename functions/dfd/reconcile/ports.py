"""The ingest queue's port (SQS, :class:`dfd.adapters.queue.SqsIngestQueue`): the reconcile's re-drives."""

from __future__ import annotations

from typing import Protocol


class IngestQueue(Protocol):
    def send(self, body: str) -> None:
        """Put one message (an S3 notification's body) on the ingest queue."""
        ...
