"""A deterministic text stream: DNA-like reads with planted motifs (demo, simulators, tests).

Moved here from ``benchmarks/text.py`` so the package (``streamk demo --text``, the
simulators' ``text`` stream kind) needs nothing outside it. Reads over ``acgt`` are 60-100
bases long. A positive read carries one of three planted 12-base motifs, each copy with
every base substituted with probability 0.12 and one insertion or deletion with
probability 0.3; a negative read is background, half of them with a *decoy* (a motif with
its halves swapped: almost the same k-mers, not the motif's order). Seeded: the same
events on every run and machine (``random.Random``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

__all__ = ["MOTIFS", "motif_stream", "iter_motifs"]

MOTIFS = ("gattacagcatc", "ccgtaatgcgta", "tgcatgcaagtc")


def _mutate(motif: str, rng: random.Random) -> str:
    bases = [rng.choice("acgt") if rng.random() < 0.12 else b for b in motif]
    if rng.random() < 0.3:
        at = rng.randrange(len(bases))
        if rng.random() < 0.5:
            del bases[at]
        else:
            bases.insert(at, rng.choice("acgt"))
    return "".join(bases)


def iter_motifs(n: int | None = None, seed: int = 17) -> Iterator[tuple[str, bool]]:
    """``(read, label)`` pairs, ``n`` of them (None: endless), seeded by ``seed``."""
    rng = random.Random(seed)
    i = 0
    while n is None or i < n:
        i += 1
        length = rng.randint(60, 100)
        read = "".join(rng.choice("acgt") for _ in range(length))
        y = rng.random() < 0.5
        if y:
            insert = _mutate(rng.choice(MOTIFS), rng)
        elif rng.random() < 0.5:
            m = rng.choice(MOTIFS)
            insert = _mutate(m[6:] + m[:6], rng)  # decoy: the same k-mers, mostly
        else:
            insert = ""
        at = rng.randrange(length - len(insert) + 1)
        yield read[:at] + insert + read[at + len(insert) :], y


def motif_stream(n: int, seed: int = 17) -> list[tuple[str, bool]]:
    """The first ``n`` pairs of :func:`iter_motifs` as a list (``benchmarks.text``'s stream)."""
    return list(iter_motifs(n, seed))
