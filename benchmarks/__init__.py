"""Reproducible comparisons of streamk with river and scikit-learn (python -m benchmarks.NAME).

BLAS is pinned to one thread here, before NumPy loads, unless the environment says
otherwise: the kernel blocks of on-line learning are small, and on a 2-core machine
BLAS threads only contend with the interpreter. Set OPENBLAS_NUM_THREADS to override.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
