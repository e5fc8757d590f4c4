"""The drain and the lifecycle stay in functions a reader takes in at once (issue 44).

``workflows/lifecycle.py``'s begin and failure path were 99 and 134 lines, and the drain's
``DrainRun`` one 400-line class; they are tables of steps and classes of one concept each
now (``drain_*.py``). This test reads those files with ``ast`` (nothing is imported) and fails
on a function or method of 50 lines or more, and on a class that grows back to hold a drain's
every part.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

WORKFLOWS = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "workflows"
FILES = sorted([WORKFLOWS / "lifecycle.py", WORKFLOWS / "drain.py", *WORKFLOWS.glob("drain_*.py")])
MAX_FUNCTION_LINES = 49  # under 50, the signature and docstring included
MAX_CLASS_LINES = 250


def lengths(path: Path) -> Iterator[Tuple[str, str, int]]:
    """(kind, qualified name, lines) of every function, method and class in ``path``."""
    def walk(node: ast.AST, prefix: str) -> Iterator[Tuple[str, str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                name = f"{prefix}{child.name}"
                yield kind, name, child.end_lineno - child.lineno + 1
                yield from walk(child, name + ".")
            else:
                yield from walk(child, prefix)
    yield from walk(ast.parse(path.read_text(), str(path)), "")


def test_the_files_are_found():
    names = {p.name for p in FILES}
    assert {"lifecycle.py", "drain.py", "drain_run.py"} <= names, names


def test_no_function_reaches_50_lines():
    long: List[str] = [f"{path.name}: {name} has {n} lines" for path in FILES
                       for kind, name, n in lengths(path) if kind == "function" and n > MAX_FUNCTION_LINES]
    assert not long, "split along the steps it serves:\n" + "\n".join(long)


def test_no_class_holds_every_part_of_a_drain_again():
    big: List[str] = [f"{path.name}: {name} has {n} lines" for path in FILES
                      for kind, name, n in lengths(path) if kind == "class" and n > MAX_CLASS_LINES]
    assert not big, "give the part its own class and file:\n" + "\n".join(big)


def test_the_check_sees_a_long_function(tmp_path):
    """The walk finds a method nested in a class, and counts its whole body."""
    source = tmp_path / "sample.py"
    source.write_text("class A:\n    def f(self):\n" + "        x = 1\n" * 60)
    found = {name: n for kind, name, n in lengths(source)}
    assert found == {"A": 62, "A.f": 61}
