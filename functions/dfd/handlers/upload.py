"""POST /upload → 201 presigned PUT, or 409 when the content is already stored."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from dfd import deps
from dfd.adapters import aws
from dfd.core.config import settings
from dfd.core.http import json_body, json_response, make_app, query_values, resolve
from dfd.core.observability import logger, metrics, tracer
from dfd.handlers import init_done
from dfd.identity.caller import current_caller
from dfd.uploads.service import parse_request

settings()  # fail fast on a broken configuration
app = make_app()


@app.post("/upload")
def create_upload() -> Any:
    query_values(app)
    caller = current_caller(app)
    request = parse_request(json_body(app), settings().max_upload_bytes)
    answer = deps.upload_service().create(request, caller)
    if answer.status == 409:
        metrics.add_metric(name="DuplicatesAvoidedPrecheck", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="BytesSaved", unit=MetricUnit.Bytes, value=answer.body["file"]["size"])
        logger.info("precheck duplicate", extra={"hash": request.sha256, "outcome": "duplicate"})
    else:
        metrics.add_metric(name="UploadsIssued", unit=MetricUnit.Count, value=1)
        logger.info("upload issued", extra={"upload_id": answer.body["upload_id"], "size": request.size})
    return json_response(answer.status, answer.body)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler(capture_response=False)  # the body carries a presigned URL (item 8)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(app, event, context)


init_done(deps.upload_service, aws.dynamodb().build, aws.s3().build)
