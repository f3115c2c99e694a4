"""S3 adapter: the only package that talks to S3, and the one that turns its ClientError into domain errors
(implements :class:`dfd.core.objects.ObjectStore`).

One module per concern — :mod:`.reads` (identify an object, stream its bytes to the ingest's hash),
:mod:`.deletes` (check or delete one version), :mod:`.presign` (signed URLs), :mod:`.multipart` (create, list,
complete, abort), :mod:`.copies` (a server-side copy) — sharing :mod:`.base` (the clients, the read tuning, error
translation).
"""

from __future__ import annotations

from dfd.adapters.s3.base import ReadTuning, translate
from dfd.adapters.s3.copies import Copies
from dfd.adapters.s3.deletes import Deletes
from dfd.adapters.s3.multipart import Multipart
from dfd.adapters.s3.presign import Presigns
from dfd.adapters.s3.reads import CHUNK, Reads


class ObjectStore(Reads, Deletes, Presigns, Multipart, Copies):
    """Every S3 call dfd makes. Receives its clients (`presign_client`, `complete_client`: see
    :class:`.base.Store`) and how it reads (`tuning`)."""


__all__ = ["CHUNK", "ObjectStore", "ReadTuning", "translate"]
