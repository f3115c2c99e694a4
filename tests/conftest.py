"""Every suite runs with a Lambda-like environment set before any handler module is imported
(handlers validate their configuration at import, as they do at Lambda init)."""

from __future__ import annotations

import os

TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "DDB_TABLE": "FileMetadata",
    "DDB_COUNTERS_TABLE": "counters",
    "UPLOADS_TABLE": "Uploads",
    "EVENTS_TABLE": "IngestEvents",
    "TENANT_FILES_TABLE": "TenantFiles",
    "S3_BUCKET": "dfd-file-service",
    "COUNTER_SHARDS": "4",
    "POWERTOOLS_SERVICE_NAME": "dfd",
    "POWERTOOLS_METRICS_NAMESPACE": "dfd",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}
for _name, _value in TEST_ENV.items():
    os.environ[_name] = _value
for _name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
    os.environ.pop(_name, None)
