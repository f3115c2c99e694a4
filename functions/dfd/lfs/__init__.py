"""Git LFS: the Batch API and verify (batch), locks (locks) and the routes' request checks (request). Imports no
submodule."""
