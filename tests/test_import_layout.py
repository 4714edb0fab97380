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


# docs/ARCHITECTURE.md's floors, bottom up: a package imports only from its own floor or below
FLOORS = [{"contracts"}, {"broker"}, {"clusters"}, {"nemesis"}, {"workloads", "checkers"}, {"pipeline"}, {"harness"}]


def project_imports() -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the files with such an import, at any depth
    of the module (imports inside functions count: they tie packages together all the same)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                for n in names:
                    top = n.split(".")[0]
                    if top in PACKAGES and top != pkg:
                        edges.setdefault((pkg, top), []).append(str(f.relative_to(ROOT)))
    return edges


def floor_of(pkg: str) -> int:
    return next(i for i, names in enumerate(FLOORS) if pkg in names)


def test_every_package_has_a_floor():
    assert sorted(set().union(*FLOORS)) == sorted(PACKAGES)


def test_imports_only_go_down():
    """The ground floor imports no project package; the broker (the system under test) only
    the ground floor; every other import goes to the same floor or below."""
    edges = project_imports()
    up = {e: fs for e, fs in edges.items() if floor_of(e[1]) > floor_of(e[0])}
    assert not up, f"imports that run up a floor: {up}"
    assert {b for a, b in edges if a == "broker"} <= {"contracts"}, edges
    assert not [e for e in edges if e[0] == "contracts"], edges


def test_no_import_cycle_between_packages():
    edges = project_imports()
    graph: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for a, b in edges:
        graph[a].add(b)
    done: set[str] = set()

    def visit(p: str, path: list[str]) -> None:
        assert p not in path, f"import cycle: {' -> '.join(path[path.index(p):] + [p])}"
        if p in done:
            return
        for q in sorted(graph[p]):
            visit(q, path + [p])
        done.add(p)

    for p in PACKAGES:
        visit(p, [])
