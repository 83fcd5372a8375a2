"""The ```python examples of docs/user-guide.md run as written, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user-guide.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[str]:
    return BLOCK.findall(GUIDE.read_text())


def test_the_guide_has_examples() -> None:
    assert len(_blocks()) >= 6


def test_guide_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict = {"__name__": "user_guide"}
    for i, code in enumerate(_blocks(), 1):
        try:
            exec(compile(code, f"{GUIDE.name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - name the block that failed
            pytest.fail(f"example {i} of {GUIDE.name} failed: {exc!r}\n{code}")
    out = capsys.readouterr().out
    printed = re.search(r"^# (Accuracy: [\d.]+%)$", GUIDE.read_text(), re.M)
    assert printed and printed.group(1) in out  # the figure the guide says it prints
    assert "non_finite" in out


def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    readme = GUIDE.parents[1] / "README.md"
    blocks = BLOCK.findall(readme.read_text())
    assert blocks, "README.md has no python example"
    namespace: dict = {"__name__": "readme"}
    for i, code in enumerate(blocks, 1):
        exec(compile(code, f"README.md[block {i}]", "exec"), namespace)
    printed = float(re.search(r"Accuracy: ([\d.]+)%", capsys.readouterr().out)[1])
    documented = float(re.search(r"# Accuracy: ([\d.]+)%", readme.read_text())[1])
    assert abs(printed - documented) <= 0.05  # rounding of a near-tie may move one event
