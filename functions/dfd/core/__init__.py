"""What every feature shares: the stored records, ids, errors and conflicts, settings, clock, hashing, the HTTP
side, observability, the object store's port. Imports no submodule (a function loads only what it runs)."""
