"""The counters' history: snapshots of the counter totals taken on a schedule (service), their items (codec) and
the storage slice they use (ports). Imports no submodule."""
