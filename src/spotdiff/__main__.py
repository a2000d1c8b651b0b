"""``python -m spotdiff`` runs the command line (needed by ``torchrun -m spotdiff``)."""

from spotdiff.cli import main

raise SystemExit(main())
