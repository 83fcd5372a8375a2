"""The streams of ``benchmarks.text``: the real corpus read as its own package reads it.

The ``names`` stream comes from the first-name list that ``gender-guesser`` ships (dev
extra). Its labels are checked against the package's own ``Detector`` (an independent
reader of the same file), and both streams are deterministic.
"""

from __future__ import annotations

import pytest

from benchmarks.text import names_stream
from streamk.sources.motifs import MOTIFS, motif_stream


def test_names_stream_labels_agree_with_gender_guessers_detector():
    detector = pytest.importorskip("gender_guesser.detector").Detector(case_sensitive=False)
    stream = names_stream(3000)
    assert stream is not None and len(stream) == 3000
    assert len({s for s, _ in stream}) == 3000  # one label per name, no repeats
    female = sum(y for _, y in stream)
    assert 0.35 < female / len(stream) < 0.65
    decided = disagree = 0
    for framed, y in stream:
        assert framed.startswith("^") and framed.endswith("$")
        gender = detector.get_gender(framed[1:-1])
        assert gender != "unknown", framed
        if gender != "andy":  # the detector's own tie; our names have one gender only
            decided += 1
            disagree += (gender in ("female", "mostly_female")) != y
    assert decided > 0.95 * len(stream) and disagree == 0


def test_names_stream_is_seeded():
    pytest.importorskip("gender_guesser")
    assert names_stream(200) == names_stream(200)
    assert names_stream(200) != names_stream(200, seed=8)


def test_names_stream_says_none_without_the_package(monkeypatch):
    import importlib.resources

    def missing(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(importlib.resources, "files", missing)
    assert names_stream(10) is None


def test_motif_stream_is_seeded_and_positives_carry_a_motif_nearby():
    a, b = motif_stream(300), motif_stream(300)
    assert a == b
    assert 100 < sum(y for _, y in a) < 200
    assert all(set(s) <= set("acgt") and 60 <= len(s) <= 101 for s, _ in a)
    # a planted copy keeps most of its bases: some 6-mer of a motif is in most positives
    hit = [any(m[i : i + 6] in s for m in MOTIFS for i in range(7)) for s, y in a if y]
    assert sum(hit) / len(hit) > 0.8


def test_user_guide_quotes_the_committed_text_benchmark():
    """The user guide's text-stream accuracies are the committed results' best rows."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = json.loads((root / "benchmarks" / "results" / "text.json").read_text())
    guide = (root / "docs" / "user-guide.md").read_text()
    section = " ".join(guide.split("## Text and sequences", 1)[1].split("\n## ", 1)[0].split())
    assert "python -m benchmarks.text" in section
    for stream in ("motif", "names"):
        for _, accuracy in (
            doc["streams"][stream]["best_streamk"],
            doc["streams"][stream]["best_river"],
        ):
            assert f"{accuracy:.3f}" in section, (stream, accuracy)
    fast = doc["streams"]["motif"]["results"]["streamk MarginPerceptron(1) Normalized(Spectrum(7))"]
    assert f"{fast['accuracy']:.3f}" in section
