"""Write river's Bananas data set as a CSV (header ``x1,x2,y``) for the compose produce job.

``python make_sample.py OUT.csv`` — river ships Bananas inside its wheel, so this needs no
network. The label column is the last one, as ``streamk produce`` expects by default.
"""

from __future__ import annotations

import csv
import sys


def main(path: str) -> int:
    from river import datasets

    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["x1", "x2", "y"])
        n = 0
        for x, y in datasets.Bananas():
            writer.writerow([*x.values(), int(y)])
            n += 1
    print(f"wrote {n} rows to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bananas.csv"))
