"""The benchmark suite (``bench/run``, ``make bench``): every target of docs/performance.md as one table row.

Modules:

- ``__main__``: options, runs the rows, writes the table, JSON and plot.
- ``harness``: the emulator, dfd's environment pointing at it, the template's resources, objects, call counting.
- ``emulator``: moto server in its own process (objects kept in memory; the stack's DynamoDB serialization).
- ``proxy``: a bandwidth/latency-capping TCP proxy standing in for real S3.
- ``rows_io``: targets 1-4 (hash throughput, memory, checksum fast path, parallel ranged reads).
- ``memprobe``: one ingest's peak RSS in a fresh process (target 2).
- ``rows_api``: targets 5-6 (AWS calls and DynamoDB capacity per ingest, stats and hashes cost).
- ``rows_cold``: target 7 (cold start per function).
- ``e2e``: target 8 (uploads end to end over the local stack vs in-process).
- ``rows_multipart``: targets 10-12 (multipart upload with parts in parallel, resume, memory of a multipart ingest).
- ``mpupload``: targets 10-11's uploads over HTTP on the local stack, in their own process.
- ``counters_sim``, ``scaling``: target 9 (sharded counters under conflicts; throughput limits on AWS).
- ``report``: the Markdown table, its JSON and the SVG plot.
"""

import os

# awscrt is importable (the segments' CRC64NVME, dfd.ingest.crc64nvme): botocore, imported after this, signs with
# its own SigV4 as on Lambda (template.yaml's Globals), never through the CRT
os.environ["BOTO_DISABLE_CRT"] = "true"
