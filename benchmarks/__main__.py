"""``python -m benchmarks``: every suite, or those --only names."""

import sys

from .run import main

sys.exit(main())
