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


PACKAGES = ["broker", "checkers", "clusters", "contracts", "harness", "nemesis", "pipeline", "suites", "workloads"]


@pytest.mark.parametrize("name", PACKAGES)
def test_packages_are_the_projects(name):
    mod = importlib.import_module(name)
    assert getattr(mod, "__file__", None) == str(ROOT / name / "__init__.py"), mod


# docs/ARCHITECTURE.md's floors, bottom up: a package imports only from its own floor or below
FLOORS = [{"contracts"}, {"broker"}, {"clusters"}, {"nemesis"}, {"workloads", "checkers"}, {"suites"}, {"pipeline"},
          {"harness"}]


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


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages (a package is
    its `__init__.py`)."""
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = f
    return mods


def module_imports() -> dict[str, set[str]]:
    """Module -> the project modules it imports, at any depth (inside functions and under
    `if TYPE_CHECKING:` too: a cycle there is still two modules that need each other).
    `import a.b` and `from a.b import c` are edges to the module a.b; `from a.b import c`
    is an edge to a.b.c when that is a module. Absolute and relative imports alike."""
    mods = module_files()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, f in mods.items():
        package = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                graph[mod].update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    base_name = ".".join(base + ([node.module] if node.module else []))
                else:
                    base_name = node.module or ""
                for a in node.names:
                    sub = f"{base_name}.{a.name}"
                    if sub in mods:
                        graph[mod].add(sub)
                    elif base_name in mods:
                        graph[mod].add(base_name)
    for mod in graph:
        graph[mod].discard(mod)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [m1, m2, ..., m1], or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        stack = [iter(sorted(graph[start]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif nxt in on_path:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_find_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "x"}, "b": set(), "x": {"y"}, "y": {"x"}}) == ["x", "y", "x"]


def test_module_imports_resolve_relative_and_submodules():
    graph = module_imports()
    assert "checkers.queue.analysis" in graph["checkers.queue"]  # from checkers.queue.analysis import ...
    assert "contracts.history" in graph["checkers.liveness"]


def test_no_import_cycle_between_modules():
    """No two modules need each other, directly or around a circle, not even through an
    import inside a function or under TYPE_CHECKING (docs/ARCHITECTURE.md)."""
    cycle = find_cycle(module_imports())
    assert cycle is None, f"import cycle between modules: {' -> '.join(cycle)}"


LAZY_MARK = "# lazy:"


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _is_import_module_call(node: ast.AST) -> bool:
    """`importlib.import_module(...)`, `import_module(...)` or `__import__(...)`."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in ("import_module", "__import__")


def lazy_imports(source: str, filename: str = "<src>") -> list[tuple[int, bool]]:
    """(line, stated) of every import made inside a function of `source`: import statements
    (not under `if TYPE_CHECKING:`) and `importlib.import_module` / `__import__` calls.
    `stated`: a `# lazy:` comment on one of the import's lines or on the line above it; for
    a run of import statements one after another, the comment above the run covers it."""
    lines = source.splitlines()
    out: list[tuple[int, bool]] = []

    def commented(first: int, last: int) -> bool:
        return any(LAZY_MARK in lines[i - 1] for i in range(max(first - 1, 1), last + 1))

    def visit(node: ast.AST, in_function: bool) -> None:
        for field in ("body", "orelse", "finalbody", "handlers"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            run_start = None  # first line of the run of import statements so far
            for stmt in stmts:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    run_start = stmt.lineno if run_start is None else run_start
                    if in_function:
                        out.append((stmt.lineno, commented(stmt.lineno, stmt.end_lineno or stmt.lineno)
                                    or commented(run_start, run_start)))
                else:
                    run_start = None
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and _is_import_module_call(child):
                out.append((child.lineno, commented(child.lineno, child.end_lineno or child.lineno)))
            visit(child, inner)

    visit(ast.parse(source, filename), False)
    return out


def test_lazy_imports_finds_and_reads_comments():
    src = '''
import os
from typing import TYPE_CHECKING

def f():
    if TYPE_CHECKING:
        import typing
    import a  # lazy: a takes 1 s
    # lazy: b and c take 2 s
    import b

    from c import d
    x = 1
    import e
    try:
        import g  # lazy: optional
    except ImportError:
        pass
    return importlib.import_module("h")

class K:
    def m(self):
        import i
        # lazy: registry
        return __import__("j")
'''
    assert lazy_imports(src) == [(8, True), (10, True), (12, True), (14, False), (16, True), (19, False),
                                 (23, False), (25, True)]


def test_every_import_in_a_function_states_why():
    """Imports go at the top of a module; one inside a function (or an importlib call) needs a
    measured reason (start-up time, an optional dependency, an import that must wait for
    something), stated beside it as `# lazy: ...` on its line or the line above (DESIGN)."""
    missing = []
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            rel = f.relative_to(ROOT)
            missing += [f"{rel}:{line}" for line, stated in lazy_imports(f.read_text(), str(rel)) if not stated]
    assert not missing, f"imports inside functions without a `# lazy: reason` comment: {missing}"
