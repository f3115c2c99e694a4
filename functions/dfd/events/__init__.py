"""The outcomes dfd publishes, derived from the stream's changes (outcomes), and their publisher. Imports no
submodule."""
