"""The local names, defined once: what the local stack, the tests, the tools and the bench call things.

On AWS, CloudFormation generates the resource names and the functions learn them from their environment
(``DDB_TABLE``, ``S3_BUCKET``...); locally they are fixed here. Everything else derives from this module:
``dfdlocal.template`` names the template's resources with it, ``dfdtools`` defaults to it, the bench and
``tests/conftest.py`` set the functions' environment from :data:`ENVIRONMENT`.

Standard library only: ``tests/conftest.py`` imports it before any handler (handlers read their environment
at import).
"""

from __future__ import annotations

import os
import re

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"  # moto's default account
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}

# template logical id -> local table name
TABLES = {
    "FilesTable": "FileMetadata",
    "CountersTable": "counters",
    "UploadsTable": "Uploads",
    "EventsTable": "IngestEvents",
    "TenantFilesTable": "TenantFiles",
    "LfsTokensTable": "LfsTokens",
    "LfsLocksTable": "LfsLocks",
    "StatsHistoryTable": "StatsHistory",
}
# the functions' environment variable -> the table's logical id
TABLE_VARIABLES = {
    "DDB_TABLE": "FilesTable",
    "DDB_COUNTERS_TABLE": "CountersTable",
    "UPLOADS_TABLE": "UploadsTable",
    "EVENTS_TABLE": "EventsTable",
    "TENANT_FILES_TABLE": "TenantFilesTable",
    "LFS_TOKENS_TABLE": "LfsTokensTable",
    "LFS_LOCKS_TABLE": "LfsLocksTable",
    "STATS_HISTORY_TABLE": "StatsHistoryTable",
}
BUCKET = "dfd-file-service"  # the bucket the functions know as S3_BUCKET
NAME_PREFIX = "dfd-"  # other buckets, queues and state machines: dfd-<kebab-case logical id stem>

# The resource names the functions read from their environment, with their local values.
ENVIRONMENT = {variable: TABLES[logical_id] for variable, logical_id in TABLE_VARIABLES.items()} | {
    "S3_BUCKET": BUCKET,
    "EVENT_BUS_NAME": NAME_PREFIX + "bus",  # = event_bus_name("EventBus")
}

# make run's ports, and the variables that move them
AWS_PORT = ("DFD_AWS_PORT", 4566)
API_PORT = ("DFD_API_PORT", 3000)
LAMBDA_PORT = ("DFD_LAMBDA_PORT", 3001)


def kebab(logical_id: str) -> str:
    """IngestDLQ -> ingest-dlq, FilesBucket -> files-bucket."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", logical_id).lower()


def table_name(logical_id: str) -> str:
    return TABLES.get(logical_id, logical_id.removesuffix("Table") or logical_id)


def queue_name(logical_id: str, *, fifo: bool = False) -> str:
    return NAME_PREFIX + kebab(logical_id.removesuffix("Queue") or logical_id) + (".fifo" if fifo else "")


def state_machine_name(logical_id: str) -> str:
    return NAME_PREFIX + kebab(logical_id.removesuffix("StateMachine") or logical_id)


def other_bucket_name(logical_id: str) -> str:
    """A bucket other than the functions' S3_BUCKET."""
    return NAME_PREFIX + kebab(logical_id)


def role_name(logical_id: str) -> str:
    """S3CredentialsRole -> dfd-s3-credentials-role."""
    return NAME_PREFIX + kebab(logical_id)


def event_bus_name(logical_id: str) -> str:
    """EventBus -> dfd-bus, AuditEventBus -> dfd-audit-bus."""
    stem = logical_id.removesuffix("EventBus")
    return NAME_PREFIX + (kebab(stem) + "-" if stem else "") + "bus"


INGEST_QUEUE = queue_name("IngestQueue")
# the local stack delivers every event on its bus here (dfdlocal.streams): local consumers, tests, scripts/events
EVENTS_QUEUE = "dfd-events"
RECONCILE_STATE_MACHINE = state_machine_name("ReconcileStateMachine")


def local_url(port: tuple[str, int]) -> str:
    """make run's endpoint on 127.0.0.1, at the port its variable moved it to (e.g. DFD_AWS_PORT)."""
    variable, default = port
    return f"http://127.0.0.1:{os.environ.get(variable, '').strip() or default}"
