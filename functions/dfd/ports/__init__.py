"""The ports the domain modules (ingest, uploads, queries) depend on: what they ask of storage, in their terms.

Adapters implement them (:class:`dfd.adapters.dynamo.Repository`, :class:`dfd.adapters.s3.ObjectStore`;
deps.py wires them); ``tests/unit/fakes.py`` holds an in-memory model of each. A repository write is an
intent ("commit this object version as new content", "count a duplicate avoided"): which items, keys and
conditions it becomes is the adapter's business alone. A write refused by one of its conditions raises one of
the typed conflicts of dfd.conflicts, carrying the record that stood in the way as the store returned it (or
None). Records and their enums are dfd.records.

Each port is a module, and this package imports none of them, so a function loads only what it runs (the read
functions never load the write payloads; docs/performance.md, target 7):

- :mod:`.repository`: the repository (every read and write of the stored records);
- :mod:`.contents`, :mod:`.uploads`: the payloads of its writes, by aggregate;
- :mod:`.objects`: the object store (S3), and what it returns;
- :mod:`.queue`: the ingest queue.
"""
