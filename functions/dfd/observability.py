"""Powertools Logger, Tracer and Metrics shared by every function (service/namespace from the environment)."""

from __future__ import annotations

import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
# auto_patch off: patching botocore imports the X-Ray SDK at init (≈300 ms of cold start); the handlers'
# capture_lambda_handler still records each invocation, and the SDK loads on first use only.
tracer = Tracer(auto_patch=False)
metrics = Metrics()

# a request that emits no metric (a 400, a TestEvent) is normal: no warning for the empty flush
warnings.filterwarnings("ignore", message="No application metrics to publish")
