"""python -m asyncfs.cli: the command line."""

from . import main

raise SystemExit(main())
