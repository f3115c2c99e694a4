"""The read side: files, uploads, stats and hashes (service), GET /me (me), the public JSON shapes (views),
pagination tokens (tokens). Imports no submodule."""
