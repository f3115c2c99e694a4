"""The ingest queue (dfd.reconcile.ports.IngestQueue): the reconcile's re-drives, as S3 would have notified them."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dfd.core.errors import DfdError, ServiceUnavailable


class SqsIngestQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, body: str) -> None:
        try:
            self._sqs.send_message(QueueUrl=self._url, MessageBody=body)
        except BotoCoreError as error:
            raise ServiceUnavailable(f"SQS SendMessage failed: {error}") from error
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            raise DfdError(f"SQS SendMessage failed ({code})", code="queue_error") from error
