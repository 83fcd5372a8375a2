"""streamk: streaming on-line kernel learning.

Budgeted kernel learners with river's API, batch consolidation warm-started from
the on-line model, and safe, checksummed msgpack snapshots, fed from Kafka,
recorded event logs or plain Python iterables.
"""

from __future__ import annotations

from . import errors

__version__ = "0.1.0"

__all__ = ["errors", "__version__"]
