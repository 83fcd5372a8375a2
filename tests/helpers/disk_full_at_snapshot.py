"""Run ``streamk`` with the snapshot volume full from its N-th snapshot file on.

``python tests/helpers/disk_full_at_snapshot.py N replay ...``: the engine works normally
until the store writes its N-th snapshot file of this process; from then on (a full
volume stays full until someone frees space: the shutdown checkpoint's retry fails too)
each snapshot's temp file is written and its ``fsync`` fails with ``ENOSPC``, as a full
volume answers (delayed allocation reports the lack of space at the sync). Only that
moment is patched: the store's clean-up, the engine's refusal to commit, the exit code
and the next start are the real ones. A full disk cannot be made for real in a test
without mount privileges.
"""

from __future__ import annotations

import errno
import os
import sys

from streamk.snapshot import store


def main() -> int:
    at = int(sys.argv[1])
    real_write, real_fsync = store._atomic_write, os.fsync
    calls = [0]

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def atomic_write(path, data):
        if path.suffix == store.SUFFIX:
            calls[0] += 1
            if calls[0] >= at:
                os.fsync = full  # only while this one file is written
                try:
                    return real_write(path, data)
                finally:
                    os.fsync = real_fsync
        return real_write(path, data)

    store._atomic_write = atomic_write
    from streamk.cli import main as streamk_main

    return streamk_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
