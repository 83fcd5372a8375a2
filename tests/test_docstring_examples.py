"""The examples in the package's docstrings run and print what they say (``>>>`` blocks).

A docstring's example is the first code a user copies; three of them had gone stale (the
figures of defaults changed since) because nothing ran them.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import streamk


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(streamk.__path__, "streamk."):
        if info.name.split(".")[-1].startswith("_") or ".cli." in info.name:
            continue
        module = importlib.import_module(info.name)
        if any(t.examples for t in doctest.DocTestFinder().find(module)):
            names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_the_package_has_examples():
    assert "streamk.learners.perceptron" in MODULES and len(MODULES) >= 3


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_print_what_they_say(name):
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False, report=True
    )
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
