"""The project's packages, not the test folders named like them, are what the tests import.

pytest puts each test folder's parent on sys.path (rootdir import mode); without the project
root first (`pythonpath = ["."]` in pyproject.toml), `tests/checkers/` and friends would be
imported as namespace packages in place of the real ones."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


PACKAGES = ["broker", "checkers", "clusters", "contracts", "harness", "nemesis", "pipeline", "workloads"]


@pytest.mark.parametrize("name", PACKAGES)
def test_packages_are_the_projects(name):
    mod = importlib.import_module(name)
    assert getattr(mod, "__file__", None) == str(ROOT / name / "__init__.py"), mod


def test_ground_floor_imports_no_project_package():
    """`contracts` (DESIGN.md's ground floor) builds on nothing else of the project."""
    for f in sorted((ROOT / "contracts").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for n in names:
                top = n.split(".")[0]
                assert top not in PACKAGES or top == "contracts", f"{f.relative_to(ROOT)} imports {n}"
