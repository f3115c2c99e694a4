"""DynamoDB adapter: the only package that knows item layouts, keys, conditions and transaction shapes, and the
one that turns ClientError into domain errors. :class:`Repository` implements every narrow storage port the
services declare (dfd.core.reads and each feature's `ports`: uploads, ingest, deletes, queries, reconcile, lfs).

One module per aggregate — :mod:`.uploads` (registration, quota, multipart records, cancel), :mod:`.contents` (the
ingest's commits: new content, duplicate, resurrection), :mod:`.precheck` (the precheck's duplicate),
:mod:`.adoption` (a lost copy adopted), :mod:`.deletes`, :mod:`.reads` (reads and paging), :mod:`.reaper` and
:mod:`.lease` (the reconcile's), and the three tables of their own, :mod:`.locks` (Git LFS locks), :mod:`.pats`
(personal access tokens) and :mod:`.history` (the counters' snapshots) — sharing :mod:`.base` (attribute values,
errors, the transaction plan) and :mod:`.references` (the reference items several commits write). Each table's items
are parsed into their records and written in one place: the main tables' in :mod:`.codec`, the locks' and the
tokens' in their module. docs/design.md, "Storage", lists the aggregates and items.
"""

from __future__ import annotations

from dfd.adapters.dynamo.adoption import Adoption
from dfd.adapters.dynamo.base import from_item, to_attr, to_item, translate
from dfd.adapters.dynamo.contents import Contents
from dfd.adapters.dynamo.deletes import Deletes
from dfd.adapters.dynamo.history import Snapshots
from dfd.adapters.dynamo.lease import Leases
from dfd.adapters.dynamo.precheck import Precheck
from dfd.adapters.dynamo.reads import Reads
from dfd.adapters.dynamo.reaper import Reaper
from dfd.adapters.dynamo.uploads import Uploads


class Repository(Reads, Uploads, Contents, Precheck, Adoption, Deletes, Reaper, Leases, Snapshots):
    """Reads and writes of the five tables. Receives its client; `rng` spreads pending uploads and the reaper's
    marks over their index shards."""


# the attribute-value and error helpers, for the adapters of other tables (their own codecs)
__all__ = ["Repository", "from_item", "to_attr", "to_item", "translate"]
