"""The project's packages, not the test folders named like them, are what the tests import.

pytest puts each test folder's parent on sys.path (rootdir import mode); without the project
root first (`pythonpath = ["."]` in pyproject.toml), `tests/checkers/` and friends would be
imported as namespace packages in place of the real ones."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["broker", "checkers", "clusters", "harness", "nemesis", "pipeline", "workloads"])
def test_packages_are_the_projects(name):
    mod = importlib.import_module(name)
    assert getattr(mod, "__file__", None) == str(ROOT / name / "__init__.py"), mod
