"""Prints a results file as docs/benchmarks.md shows it: per area, each
row's verdict and target.

    python -m benchmarks.report                      # benchmarks/results/latest.json
    python -m benchmarks.report path/to/run.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .harness import Row, summary

LATEST = Path(__file__).parent / "results" / "latest.json"


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else LATEST
    rows = [Row(**fields) for fields in json.loads(path.read_text())]
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
