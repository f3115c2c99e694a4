"""Issuing uploads: registration and the precheck (service), multipart uploads, who may act on an upload, and
the storage slices and write payloads they use (ports). Imports no submodule."""
