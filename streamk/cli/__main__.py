"""``python -m streamk.cli``: the same as the ``streamk`` command."""

from __future__ import annotations

import sys

from .main import main

sys.exit(main())
