"""Sub-commands of the ``spotdiff`` CLI, one module each (see ``spotdiff.cli``)."""
