"""The ``topo`` command line: one module per command, one shared output helper, one error path."""
