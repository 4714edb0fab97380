"""References in comments, docstrings and docs point at files the repository has.

A path-looking token ending in .md, .py, .yaml or .yml, in a comment or docstring of a
Python file or anywhere in a Markdown or YAML file, must name a file that exists relative
to the repository root or to the citing file's folder (so docs/ pages name each other by
bare name). A bare file name (no folder), as in a table of one folder's modules, may also
name a file anywhere in the repository. A path into the shared research folder beside
the checkout (notes, seeds, data) is never right, wherever it points: the repository does
not have it. The protocol rules the code cites live in docs/protocol-rules.md, which says
where the seed documents are; citations such as "seed 003 section 2.9" need no path.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCANNED = ["broker", "checkers", "clusters", "contracts", "harness", "nemesis", "pipeline", "workloads",
           "docs", "bench", "tests"]
SUFFIXES = {".py", ".md", ".yaml", ".yml"}
SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", "results"}

# Names in usage lines that stand for the user's own files.
PLACEHOLDERS = {
    "FILE.yaml": "`wrack campaign FILE.yaml`: the user's campaign file",
    "hosts.yaml": "`--inventory hosts.yaml`: the user's ssh inventory",
}

# A token not glued to a longer path-like word (so no tail of a URL or of `<run>/x.yaml`).
PATH = re.compile(r"(?<![\w./<>*{}$~:-])((?:\.\.?/|/)?[\w.-]+(?:/[\w.-]+)*\.(?:md|py|yaml|yml))(?![\w/*<>{}-])")
OUTSIDE = re.compile(r"(?:\.\./shared|/work/shared)\b(?:/[\w.-]+)*")
# A section of a page: `docs/protocol-rules.md "Elections"` names a heading of that page.
SECTION = re.compile(r"(?<![\w./-])([\w./-]+\.md) \"([^\"]+)\"")


def scanned_files() -> Iterator[Path]:
    for top in SCANNED:
        for p in sorted((ROOT / top).rglob("*")):
            rel = p.relative_to(ROOT).parts
            if p.suffix in SUFFIXES and p.is_file() and not SKIPPED_DIRS.intersection(rel):
                yield p


def cited_text(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of what may cite a file: comments and docstrings of a Python
    file (code and other strings name runtime files, not references), every line of the rest."""
    src = path.read_text(errors="replace")
    lines = src.splitlines()
    if path.suffix != ".py":
        yield from enumerate(lines, 1)
        return
    if not PATH.search(src) and not OUTSIDE.search(src):
        return  # nothing path-like anywhere: no need to tell comments from code
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(src, str(path))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                for n in range(first.lineno, (first.end_lineno or first.lineno) + 1):
                    yield n, lines[n - 1]


def repo_file_names() -> set[str]:
    names: set[str] = set()
    for _folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        names.update(files)
    return names


def resolves(token: str, citing: Path, names: set[str]) -> bool:
    if token.startswith("/"):
        return False  # an absolute path is never a file of the repository
    if (ROOT / token).exists() or (citing.parent / token).exists():
        return True
    return "/" not in token and token in names


def headings(page: Path) -> list[str]:
    return [h.lstrip("#").strip() for h in page.read_text().splitlines() if re.match(r"#+ ", h)]


def has_section(page: Path, section: str) -> bool:
    """A heading of `page` is `section`, maybe followed by a parenthesis (`## Clock skew (...)`)."""
    return any(h == section or h.startswith(section + " (") for h in headings(page))


def broken_references() -> list[str]:
    names = repo_file_names()
    broken: list[str] = []
    for path in scanned_files():
        rel = path.relative_to(ROOT)
        for line, text in cited_text(path):
            for m in SECTION.finditer(text):
                page = next((p for p in (ROOT / m.group(1), path.parent / m.group(1)) if p.is_file()), None)
                if page is not None and not has_section(page, m.group(2)):
                    broken.append(f"{rel}:{line}: {m.group(1)} has no section \"{m.group(2)}\"")
            for m in OUTSIDE.finditer(text):
                broken.append(f"{rel}:{line}: {m.group(0)} (outside the repository)")
            for m in PATH.finditer(text):
                token = m.group(1)
                if OUTSIDE.match(token) or token in PLACEHOLDERS:
                    continue
                if not resolves(token, path, names):
                    broken.append(f"{rel}:{line}: {token}")
    return broken


def test_every_cited_file_exists():
    broken = broken_references()
    assert not broken, "references to files the repository does not have:\n" + "\n".join(broken)


def test_the_check_finds_what_it_should(tmp_path):
    """The patterns catch the kinds of reference this test exists for, and leave alone
    what is not one."""
    found = [m.group(1) for m in PATH.finditer(
        "see notes/kafka.md 4.8, docs/harness.md, (broker.py), https://x.org/a/b.md, "
        "<run>/history.yaml, tests/*.py, seeds/s")]
    assert found == ["notes/kafka.md", "docs/harness.md", "broker.py"]
    assert [m.group(0) for m in OUTSIDE.finditer("../shared/seeds and /work/shared/notes/faults.md")] == \
        ["../shared/seeds", "/work/shared/notes/faults.md"]
    citing = ROOT / "broker" / "core" / "replica.py"
    names = {"broker.py"}
    assert resolves("broker.py", citing, names)  # the citing file's folder
    assert resolves("docs/protocol-rules.md", citing, names)  # the repository root
    assert not resolves("notes/kafka.md", citing, names)
    assert not resolves("core/metadata.py", ROOT / "broker" / "server" / "x.py", names)
    assert not resolves("/etc/hosts.yaml", citing, names)
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n## Clock skew (`nemesis/clock.py`)\n\ntext\n")
    assert has_section(page, "Clock skew") and not has_section(page, "Clock") and not has_section(page, "text")
    assert [m.groups() for m in SECTION.finditer('(docs/nemesis.md "Clock skew")')] == \
        [("docs/nemesis.md", "Clock skew")]
    doc = tmp_path / "x.py"
    doc.write_text('"""Doc (a.md)."""\n# comment b.md\nX = "c.md"\n')
    assert [t for _, t in cited_text(doc)] == ["# comment b.md", '"""Doc (a.md)."""']
