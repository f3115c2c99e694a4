"""The one retry policy (docs/retries.md): who retries what, how long each pause is, and what it may cost a function.

* **botocore retries throttling and transient errors** (throttling codes, 5xx, timeouts, dropped connections) in
  its standard mode: at most ``CallLimits.attempts`` attempts of one call, each bounded by its connect and read
  timeouts, pausing ``rand(0, 1) * min(1 s * 2^i, 20 s)`` after a throttling error (less after other errors), and
  drawing on its client's retry quota, which stops retrying when most calls fail. Not the adaptive mode: its
  client-side rate limiter is shared by every thread of a client (the ingest's records, its ranged reads), so one
  throttled call slows them all, which AWS advises against.
* **The domain loops retry only conflicts**: a transaction cancelled by a TransactionConflict (dfd.core.errors.
  TransactionRetryable) or a condition race the domain resolves by reading again (dfd.core.conflicts) — never what
  botocore gave up on (ServiceUnavailable): that is answered 503, or left to the event source's redelivery. Between
  attempts they pause with :class:`Backoff`, the one pause of every loop.
* **A written budget per function** (:data:`BUDGETS`): its loops' attempts x the longest pause, plus one call that
  exhausts botocore's attempts at its timeouts, fits within the function's Timeout in template.yaml
  (tests/unit/test_retry_budgets.py reads the template).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# botocore's standard mode (botocore.retries.standard.ExponentialBackoff): the pause before retry i (0-based) is
# rand(0, 1) * min(scale * 2^i, 20 s), scale 1 s after a throttling error (the longest); checked against botocore
# by the budget test
BOTOCORE_THROTTLING_SCALE = 1.0
BOTOCORE_MAX_BACKOFF = 20.0

# the local stack's emulator answers far slower than DynamoDB (docs/performance.md): its timeouts are this many
# times AWS's (the budgets are AWS's)
EMULATOR_TIMEOUT_FACTOR = 10


@dataclass(frozen=True)
class CallLimits:
    """How long one AWS call may take: botocore's attempts, each within its connect and read timeouts."""

    attempts: int
    connect_timeout: float
    read_timeout: float
    emulated_longer: bool = True  # on the local stack's emulator, timeouts EMULATOR_TIMEOUT_FACTOR times longer

    def worst_seconds(self) -> float:
        """Every attempt timing out, every pause at its longest."""
        pauses = sum(min(BOTOCORE_THROTTLING_SCALE * 2.0**i, BOTOCORE_MAX_BACKOFF) for i in range(self.attempts - 1))
        return self.attempts * (self.connect_timeout + self.read_timeout) + pauses

    def config(self) -> dict[str, Any]:
        """The botocore Config arguments: standard mode, these attempts and timeouts (longer on an emulator)."""
        emulated = bool(os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3"))
        factor = EMULATOR_TIMEOUT_FACTOR if emulated and self.emulated_longer else 1
        return {
            "retries": {"mode": "standard", "total_max_attempts": self.attempts},
            "connect_timeout": self.connect_timeout * factor,
            "read_timeout": self.read_timeout * factor,
        }


# DynamoDB, Cognito, SQS, EventBridge and S3's small calls (presign, head, delete, multipart bookkeeping): answered
# in milliseconds; a second without a byte is a call to try again
API_CALLS = CallLimits(attempts=3, connect_timeout=0.5, read_timeout=1.0)
# the ingest's object reads: ranged GETs of up to 64 MiB parts streamed while hashed
OBJECT_READS = CallLimits(attempts=3, connect_timeout=1.0, read_timeout=5.0)
# CompleteMultipartUpload: one attempt whose read timeout is the request's wait (dfd.uploads.multipart: past it the
# upload is answered "completing" and the client's repeat is the retry)
COMPLETE_WAIT_SECONDS = 20
COMPLETE_CALL = CallLimits(attempts=1, connect_timeout=3.0, read_timeout=COMPLETE_WAIT_SECONDS, emulated_longer=False)
# the copy workflow's part copies (dfd.ingest.dropcopy): an UploadPartCopy of up to 5 GiB answers when S3 has copied
# it (215 s at the 25 MB/s assumed); the read timeout waits for a 5 GiB part at 13 MB/s without counting on bytes S3
# may send meanwhile; botocore repeats one that timed out once (the same part number: replaced)
COPY_CALLS = CallLimits(attempts=2, connect_timeout=1.0, read_timeout=400.0)


class Backoff:
    """The pause before a domain loop's next attempt: ``min(CAP, BASE * 2^attempt)``, jittered by x0.5 to x1.5 so
    that contending writers spread out (attempt counts from 1)."""

    BASE = 0.02
    CAP = 0.1
    LONGEST = CAP * 1.5

    def __init__(self, sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> None:
        self._sleep = sleep
        self._rng = rng or random.Random()

    def delay(self, attempt: int) -> float:
        return min(self.CAP, self.BASE * 2.0**attempt) * (0.5 + self._rng.random())

    def __call__(self, attempt: int) -> None:
        self._sleep(self.delay(attempt))


# attempts of a domain loop on an API function (a request's conflicts), and of the ingest's commit loop (conflicts
# its re-reads resolve one by one: file appeared, reference changed, quota released, then a TransactionConflict)
CONFLICT_ATTEMPTS = 5
INGEST_ATTEMPTS = 8
# attempts of the loops that resend what a batch call left undone (BatchGetItem's UnprocessedKeys, PutEvents'
# refused entries): botocore sees only the call, which succeeded
PARTIAL_ATTEMPTS = 4
# the pauses of one loop of each kind, at most (none after the last attempt)
CONFLICT_PAUSES = CONFLICT_ATTEMPTS - 1
INGEST_PAUSES = INGEST_ATTEMPTS - 1
PARTIAL_PAUSES = PARTIAL_ATTEMPTS - 1
# the precheck's re-reads (dfd.uploads.service: each reads the file and the tenant's reference in one BatchGetItem)
PRECHECK_READS = 3
# the ingest's looks at a duplicate's stored copy before it deletes the duplicate or adopts it (dfd.ingest.service)
ADOPT_ATTEMPTS = 3


@dataclass(frozen=True)
class Budget:
    """A function's worst case of retrying: the pauses of its domain loops on its worst path, each at the longest,
    plus one call that exhausts botocore's attempts at its timeouts (the first call botocore gives up on ends the
    invocation's work on that item: no loop retries it). Must fit the function's Timeout."""

    function: str  # the function's logical id in template.yaml
    calls: CallLimits  # the slowest kind of call it makes
    pauses: int  # the domain loops' pauses on its worst path
    why: str

    def seconds(self) -> float:
        return self.pauses * Backoff.LONGEST + self.calls.worst_seconds()


# the state read (and its re-read), the commit loop, the adoption's looks
_INGEST = 2 * PARTIAL_PAUSES + INGEST_PAUSES + ADOPT_ATTEMPTS - 1
BUDGETS = (
    Budget(
        "UploadFunction",
        API_CALLS,
        (PRECHECK_READS + 1) * PARTIAL_PAUSES + PRECHECK_READS - 1,
        "the precheck's reads and conflicts, then the quota's read of the usage shards",
    ),
    Budget("UploadPartsFunction", COMPLETE_CALL, 0, "CompleteMultipartUpload's one attempt"),
    Budget("UploadsFunction", API_CALLS, CONFLICT_PAUSES, "DELETE /uploads/{id} (dfd.deletes.service)"),
    Budget("LfsFunction", OBJECT_READS, _INGEST, "the verify's ingest of the object"),
    Budget(
        "TokensFunction", API_CALLS, CONFLICT_PAUSES, "a token counted against its user's limit (dfd.identity.pats)"
    ),
    Budget("MetadataFunction", API_CALLS, PARTIAL_PAUSES, "a batched read"),
    Budget("MeFunction", API_CALLS, PARTIAL_PAUSES, "a batched read"),
    Budget("DownloadFunction", API_CALLS, PARTIAL_PAUSES, "a batched read"),
    Budget("AdminStatsFunction", API_CALLS, PARTIAL_PAUSES, "the counter shards' batched read"),
    Budget("SnapshotFunction", API_CALLS, PARTIAL_PAUSES, "the shards' batched read, the snapshot's batched write"),
    Budget("AdminHashesFunction", API_CALLS, PARTIAL_PAUSES, "a batched read"),
    Budget("IngestFunction", OBJECT_READS, _INGEST, "one record's ingest (the batch's records run side by side)"),
    Budget("CopyFunction", COPY_CALLS, 0, "a step's part copies, each retried by botocore only (no domain loop)"),
    Budget("SegmentFunction", OBJECT_READS, _INGEST, "a segment's ranged reads, then the last one's commit"),
    Budget("PublisherFunction", API_CALLS, PARTIAL_PAUSES, "PutEvents' refused entries"),
    Budget("ReconcileFunction", API_CALLS, PARTIAL_PAUSES, "a batched read (each page is its own invocation)"),
)
