"""Deleting an upload (service) and the storage slice it uses (ports). Imports no submodule."""
