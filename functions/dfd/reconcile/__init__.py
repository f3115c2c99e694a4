"""The reconcile workflow's steps and the reaper (service), the S3 Inventory report, the counters' audit,
and the storage slice and queue port they use (ports). Imports no submodule."""
