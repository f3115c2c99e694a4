"""The ingest: an object that arrived becomes stored content or a duplicate (service), and the storage slice and
write payloads it uses (ports). Imports no submodule."""
