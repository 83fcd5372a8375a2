"""The ``streamk`` command: one module per command, the argument parser in :mod:`.main`."""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["main", "build_parser"]
