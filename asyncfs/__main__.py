"""``python -m asyncfs``: the command line (see :mod:`asyncfs.cli`)."""

from .cli import main

raise SystemExit(main())
