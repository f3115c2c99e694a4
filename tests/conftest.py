"""Every suite runs with a Lambda-like environment set before any handler module is imported
(handlers validate their configuration at import, as they do at Lambda init)."""

from __future__ import annotations

import os

from dfdlocal import names

TEST_ENV = {
    **names.CREDENTIALS,
    "AWS_SECURITY_TOKEN": names.CREDENTIALS["AWS_SESSION_TOKEN"],
    "AWS_DEFAULT_REGION": names.REGION,
    **names.ENVIRONMENT,  # the local stack's resource names
    "COUNTER_SHARDS": "4",  # fewer than the template's default: tests see every shard
    "POWERTOOLS_SERVICE_NAME": "dfd",
    "POWERTOOLS_METRICS_NAMESPACE": "dfd",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    # the /lfs routes verify tokens themselves (dfd.identity.credentials): tests inject the keys, nothing is fetched
    "JWT_ISSUER": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_TEST",
    "JWT_AUDIENCE": "testclient0000000000000000",
    "USER_POOL_ID": "us-east-1_TEST",
    "JWKS_URL": "http://127.0.0.1:9/.well-known/jwks.json",
    "LFS_API_URL": "https://{api_id}.execute-api.us-east-1.amazonaws.com",  # as template.yaml sets it
    # as template.yaml's Globals: awscrt is importable, botocore signs with its own SigV4 (tests/unit/test_crt.py)
    "BOTO_DISABLE_CRT": "true",
}
for _name, _value in TEST_ENV.items():
    os.environ[_name] = _value
for _name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
    os.environ.pop(_name, None)
