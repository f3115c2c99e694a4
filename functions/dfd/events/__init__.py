"""The outcomes dfd publishes, derived from the committed changes of uploads and contents (outcomes); the adapter
that reads them from the tables' streams and puts them on the bus is dfd.adapters.publisher. Imports no
submodule."""
