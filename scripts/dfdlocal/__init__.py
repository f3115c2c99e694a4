"""The local stack (``make run``): the template's functions on moto, in one process, state in memory.

Modules:

- ``__main__``: ``python -m dfdlocal`` — options, banner, runs the stack until Ctrl-C.
- ``stack``: :class:`~dfdlocal.stack.LocalStack` wires everything below together (ports, environment, start/stop).
- ``names``: the local resource names, region, credentials and ports, defined once (stdlib only).
- ``template``: template.yaml (cfn-lint's decoder) -> the local model; intrinsic functions with local names.
- ``emulator``: moto's server app (DynamoDB serialized, presigned S3 verified) and ``create_resources``, the
  one function that creates the template's tables, queues and buckets (local stack, tests and bench).
- ``s3auth``: what S3 checks on presigned requests and moto does not (SigV4, expiry, checksum).
- ``s3store``: moto's S3 storage without its copies and re-hashing (64 MiB in memory, same ETags/checksums).
- ``runtime``: hosts the functions in-process and invokes them like Lambda.
- ``apigw``: the HTTP API (payload v2 events, routes, CORS) and the web pages.
- ``lambda_api``: Lambda's Invoke API for the functions.
- ``poller``: the SQS event source mapping (batches, partial failures, heartbeat, DLQ hand-back).
- ``reconcile``: the reconcile workflow's ASL on moto's Step Functions, and the stack's timer running it.

Operator tools live in :mod:`dfdtools`, the benchmarks in :mod:`dfdbench`.
"""

import os

# awscrt is importable (the segments' CRC64NVME, dfd.ingest.crc64nvme): botocore, imported after this, signs with
# its own SigV4 as on Lambda (template.yaml's Globals), never through the CRT
os.environ["BOTO_DISABLE_CRT"] = "true"
