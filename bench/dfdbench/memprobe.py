"""Peak RSS growth of ONE ingest, in a fresh process (target 2).

``python -m dfdbench.memprobe WARMUP_KEY KEY`` (environment: dfd's, pointing at the emulator; set
AWS_ENDPOINT_URL_S3 to read S3 through the throttling proxy). It ingests WARMUP_KEY (a small object: clients,
connection pools and modules are loaded), resets the kernel's peak-RSS mark (/proc/self/clear_refs), ingests
KEY, and prints JSON: the RSS before, the peak during, and their difference.
"""

from __future__ import annotations

import json
import re
import sys


def _status() -> dict[str, int]:
    with open("/proc/self/status") as handle:
        text = handle.read()
    return {name: int(re.search(name + r":\s+(\d+)", text).group(1)) * 1024 for name in ("VmRSS", "VmHWM")}  # type: ignore[union-attr]


def main() -> None:
    from dfd import deps
    from dfd.core.config import settings
    from dfd.core.notifications import ObjectRef

    warmup, key = sys.argv[1], sys.argv[2]
    ingestor = deps.ingestor()
    bucket = settings().bucket
    ingestor.ingest(ObjectRef(bucket, warmup))
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # VmHWM := VmRSS
    before = _status()["VmRSS"]
    result = ingestor.ingest(ObjectRef(bucket, key))
    peak = _status()["VmHWM"]
    print(
        json.dumps(
            {
                "outcome": str(result.outcome),
                "size": result.size,
                "hashed": result.hashed_bytes,
                "rss_before": before,
                "rss_peak": peak,
                "growth": peak - before,
            }
        )
    )


if __name__ == "__main__":
    main()
