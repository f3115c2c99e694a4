"""dfd: the functions' code (docs/development.md has the map)."""

import sys

# botocore, when imported, loads awscrt.auth if it can, to sign through the CRT (unless BOTO_DISABLE_CRT is set).
# awscrt is a dependency for the segments' CRC64NVME only (dfd.ingest.crc64nvme), and loading its native library
# for botocore would cost every function's cold start. Marked absent before anything imports botocore, it leaves
# botocore without the CRT, signing with its own SigV4; awscrt.checksums stays importable.
sys.modules.setdefault("awscrt.auth", None)  # type: ignore[arg-type]
