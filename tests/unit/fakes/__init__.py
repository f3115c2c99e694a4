"""In-memory models of the storage ports: the domain's logic, tested in milliseconds.

FakeRepository implements every narrow port the services declare (dfd.core.reads and each feature's `ports`), one
mixin per aggregate as the DynamoDB adapter (dfd.adapters.dynamo.Repository) is: reads, uploads, deletes, contents,
the reaper, the lease and the counters' history (fakes.lfs: the LFS locks' and tokens' stores and the user
directory). It keeps the adapter's tables as dicts of items — written and parsed by the features' codecs, as the
adapter's are (dfd.core.codec, dfd.uploads.codec, dfd.ingest.codec, dfd.reconcile.codec), so its items are the
adapter's and its reads the same records — and honours the conditions of the adapter's writes: a transaction either
applies all its writes or none, and a refused one raises the typed conflict of the first failed condition in the
adapter's order (event, claim, file, upload, tenant) carrying the record that stood in the way. The contract suites
(tests/integration/contract/) run each aggregate's contract against this model, the adapter on moto and the adapter
on DynamoDB Local, so the three cannot drift.

Fault seams: `faults` (exceptions the next transactions raise before any condition is checked: throttling,
TransactionConflict), `after_state` (runs once, right after ingest_state has read: a concurrent writer) and
`after_tenant_file` (the same after tenant_file).
"""

from __future__ import annotations

from tests.unit.fakes.contents import FakeContents
from tests.unit.fakes.deletes import FakeDeletes
from tests.unit.fakes.history import FakeSnapshots
from tests.unit.fakes.objects import FakeObject, FakeObjectStore
from tests.unit.fakes.queue import FakeIngestQueue, run_reconcile
from tests.unit.fakes.reads import FakeReads
from tests.unit.fakes.reaper import FakeReaper
from tests.unit.fakes.uploads import FakeUploads


class FakeRepository(FakeReads, FakeUploads, FakeDeletes, FakeContents, FakeReaper, FakeSnapshots):
    """Every aggregate's fake, over one set of tables (dfd.adapters.dynamo.Repository's counterpart)."""


__all__ = ["FakeIngestQueue", "FakeObject", "FakeObjectStore", "FakeRepository", "run_reconcile"]
