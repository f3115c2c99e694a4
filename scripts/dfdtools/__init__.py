"""Operator tools: each targets the local stack (``make run``) by default, most also a real deployment (``--aws``).

Modules (each a ``python -m`` entry point, wrapped by the same-named script under scripts/):

- ``tools``: shared plumbing — where the stack is, ``--endpoint-url``/``--aws`` arguments, clients, errors.
- ``audit``: ``scripts/audit`` — the design's invariants checked against a live deployment (the tests use it too).
- ``replay``: ``scripts/replay`` — re-deliver S3 events N times and show that nothing changed.
- ``upload``: ``scripts/upload`` — upload files or directories through the API and wait for their ingest.
- ``reconcile``: ``scripts/reconcile`` — run the reconcile workflow now on the local stack and print its summary.

Local names and endpoints come from :mod:`dfdlocal.names`.

Ctrl-C while a tool is still importing (boto3 alone takes a few hundred ms) or after its work is done ends it
with status 130 and no traceback: this handler is installed before anything else is imported; a tool's main
(:func:`dfdtools.tools.interruptible`) turns Ctrl-C into KeyboardInterrupt while it runs, to stop cleanly.
"""

import contextlib
import os
import signal
import sys
from types import FrameType


def quiet_exit(signum: int, frame: FrameType | None) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(128 + signum)


signal.signal(signal.SIGINT, quiet_exit)
# The wrappers under scripts/ start Python with SIGINT blocked (a Ctrl-C during the interpreter's own start-up
# waits, pending, instead of interrupting it with a traceback): with the handler in place it is let through.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

# The wrappers also start Python with -S (no site) and the packages on PYTHONPATH, so that the handler is in place
# before the slowest part of start-up: the virtualenv's site-packages (and their .pth files) are added only now.
if sys.flags.no_site and "site" not in sys.modules:
    import site

    site.main()

# awscrt is importable (the segments' CRC64NVME, dfd.ingest.crc64nvme): botocore, imported after this, signs with
# its own SigV4 as on Lambda (template.yaml's Globals), never through the CRT
os.environ["BOTO_DISABLE_CRT"] = "true"
