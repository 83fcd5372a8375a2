"""The engine: poll a source, validate, learn and score, snapshot, then commit (design §1).

- :mod:`~streamk.engine.events` and :mod:`~streamk.engine.blocks`: the event schema and
  codec (one event, or a block of rows), on the rules of :mod:`~streamk.engine.schema`;
- :mod:`~streamk.engine.runs`: a polled batch cut into runs the learner takes in one call;
- :mod:`~streamk.engine.loop`: :class:`Engine`, the loop itself;
- :mod:`~streamk.engine.deadletter`, :mod:`~streamk.engine.metrics`: what it emits
  besides predictions;
- :mod:`~streamk.engine.config`, :mod:`~streamk.engine.registry`,
  :mod:`~streamk.engine.runner`: settings, names, and the builder that wires a run.
"""

from __future__ import annotations

from .loop import Engine, EngineConfig, EngineResult

__all__ = ["Engine", "EngineConfig", "EngineResult"]
