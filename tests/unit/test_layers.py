"""The core's folders are layers, and this test holds them.

plugins/module_utils/ is read as layers, lowest first: ``errors.py`` (the error hierarchy,
importable by all), ``api/`` (the client and everything that talks HTTP, resource paths
included), ``model/`` (pure rules: no I/O, so no ``api`` either), ``stores/`` (the reads and
writes of one kind of object each), ``workflows/`` (what a module does, over stores and
model), then the top files ``adapter.py``, ``specs.py`` and ``role_inputs.py``, the only ones
that may import Ansible. A file may import its own layer or a lower one. The checker reads
every file with ``ast`` (nothing is imported) and reports, each on its own line:

- an import of a higher layer (and ``model`` importing ``api``: the model does no I/O);
- an import cycle between files, function-level imports included, as they are what hid one;
- an import of the collection's own code anywhere but at module level: a function-level
  import hides an edge from the reader and from this test;
- ``importlib`` or ``__import__`` in the core: the same edge, hidden at run time;
- an ``ansible`` import outside the top files: the core is plain Python;
- a file outside the layer folders.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set

ROOT = Path(__file__).resolve().parents[2] / "plugins" / "module_utils"
PACKAGE = "ansible_collections.nmo.maintenance.plugins.module_utils"
COLLECTION = "ansible_collections.nmo.maintenance"
LAYERS = ("errors", "api", "model", "stores", "workflows", "top")
TOP_FILES = ("adapter", "specs", "role_inputs")
# What each layer may import besides itself: the order, and the model kept pure.
MAY_IMPORT = {
    "errors": set(),
    "api": {"errors"},
    "model": {"errors"},
    "stores": {"errors", "api", "model"},
    "workflows": {"errors", "api", "model", "stores"},
    "top": {"errors", "api", "model", "stores", "workflows"},
}
DYNAMIC = ("import_module", "__import__", "reload", "spec_from_file_location")


@dataclass(frozen=True)
class Import:
    source: str  # the importing file, as a dotted name under module_utils
    target: str  # the imported file, the same way
    line: int
    module_level: bool


def layer_of(module: str) -> Optional[str]:
    """The layer of a file under module_utils by its folder (top files by name); None: none."""
    first, dot, rest = module.partition(".")
    if not dot:
        return "errors" if first == "errors" else "top" if first in TOP_FILES else None
    return first if first in LAYERS[1:-1] else None


def modules(root: Path) -> Dict[str, Path]:
    return {".".join(p.relative_to(root).with_suffix("").parts): p for p in sorted(root.rglob("*.py"))}


def _nodes(tree: ast.Module) -> Iterator[tuple]:
    """Every node with whether it runs at module level (not inside a def, lambda or class)."""
    stack = [(node, True) for node in tree.body]
    while stack:
        node, top = stack.pop()
        yield node, top
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def _own_target(name: str, known: Set[str]) -> Optional[str]:
    """``name`` (dotted, under module_utils) as a known file: itself or its longest known prefix."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def read(root: Path) -> tuple:
    """(imports of own code, other problems) of the tree at ``root``."""
    known = modules(root)
    imports: List[Import] = []
    found: List[tuple] = []  # (module, line, text): sorted by file and line below
    for module, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        package = module.split(".")[:-1]
        for node, top in _nodes(tree):
            targets: List[str] = []
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                targets = [".".join(base + [alias.name]) for alias in node.names]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                full = names if isinstance(node, ast.Import) else [f"{names[0]}.{a.name}" for a in node.names]
                for name in full:
                    if name == "ansible" or name.startswith("ansible."):
                        if layer_of(module) != "top":
                            found.append((module, node.lineno, f"imports {name}: only the top files may import Ansible"))
                    elif name.startswith(PACKAGE + "."):
                        targets.append(name[len(PACKAGE) + 1:])
                    elif name.startswith(COLLECTION + ".") or name == COLLECTION:
                        found.append((module, node.lineno, f"imports {name}, collection code outside module_utils"))
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if called in DYNAMIC:
                    found.append((module, node.lineno, f"{called}(): a dynamic import hides an edge"))
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    (a.name.split(".")[0] == "importlib") for a in node.names) or (
                    isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("importlib")):
                found.append((module, node.lineno, "imports importlib: a dynamic import hides an edge"))
            for name in targets:
                target = _own_target(name, set(known))
                if target is None:
                    continue  # a package (namespace) itself: no file, no edge
                imports.append(Import(module, target, node.lineno, top))
    imports = sorted(set(imports), key=lambda imp: (imp.source, imp.line, imp.target))  # one per statement and file
    return imports, [f"{m}:{line}: {text}" for m, line, text in sorted(found)]


def cycles(imports: List[Import]) -> List[List[str]]:
    """The strongly connected groups of two or more files (and files importing themselves)."""
    graph: Dict[str, Set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.source, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    groups: List[List[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is a few dozen files deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def problems(root: Path, layer: Callable[[str], Optional[str]] = layer_of) -> Dict[str, List[str]]:
    """Every problem of the tree at ``root``, by kind; ``layer`` maps a file to its layer."""
    imports, found = read(root)
    out: Dict[str, List[str]] = {"upward": [], "cycle": [], "function-level": [], "dynamic": [], "ansible": [],
                                 "outside": [], "collection": []}
    for text in found:
        kind = ("ansible" if "Ansible" in text else "collection" if "outside module_utils" in text else "dynamic")
        out[kind].append(text)
    for module in modules(root):
        if layer(module) is None:
            out["outside"].append(f"{module}: in no layer folder (errors, api, model, stores, workflows, top files)")
    for imp in imports:
        source, target = layer(imp.source), layer(imp.target)
        if source and target and source != target and target not in MAY_IMPORT[source]:
            out["upward"].append(f"{imp.source}:{imp.line}: {source} imports {target} ({imp.target})")
        if not imp.module_level:
            out["function-level"].append(f"{imp.source}:{imp.line}: imports {imp.target} inside a function or class")
    out["cycle"] = [" <-> ".join(group) for group in cycles(imports)]
    return out


def test_the_core_keeps_its_layers() -> None:
    found = problems(ROOT)
    assert {kind: texts for kind, texts in found.items() if texts} == {}


def test_the_top_files_exist() -> None:
    # a renamed top file would silently leave the Ansible rule without the files it allows
    assert {m for m in modules(ROOT) if layer_of(m) == "top"} == set(TOP_FILES)


def _tree(root: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "errors.py": "class NmoError(Exception):\n    pass\n",
        "api/client.py": "from ..errors import NmoError\n",
        "model/plan.py": "from ..errors import NmoError\n",
        "model/rules.py": "from . import plan\n",
        "stores/things.py": "from ..api.client import Client\nfrom ..model import plan, rules\n",
        "workflows/flow.py": "from ..stores import things\n",
        "adapter.py": "from ansible.module_utils.basic import AnsibleModule\nfrom .workflows import flow\n",
        "specs.py": "from .api import client\n",
        "role_inputs.py": "from .errors import NmoError\n",
    })
    assert {kind: texts for kind, texts in problems(root).items() if texts} == {}


def test_each_kind_of_problem_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "errors.py": "",
        "api/client.py": "from ..model import plan\n",  # upward
        "model/plan.py": "from ..api import client\n",  # model does no I/O (and a cycle with api/client)
        "model/a.py": "def f():\n    from . import b\n",  # function level, and half of a cycle
        "model/b.py": "from . import a\n",
        "model/c.py": "import importlib\nM = importlib.import_module('x')\n",
        "stores/s.py": "from ansible.module_utils.basic import AnsibleModule\n",
        "workflows/w.py": f"from {PACKAGE}.workflows import w\n",  # imports itself, absolutely
        "workflows/x.py": f"from {COLLECTION}.plugins.plugin_utils import progress\n",
        "misc/m.py": "",
    })
    found = problems(root)
    assert found["upward"] == ["api.client:1: api imports model (model.plan)",
                               "model.plan:1: model imports api (api.client)"]
    assert found["cycle"] == ["api.client <-> model.plan", "model.a <-> model.b", "workflows.w"]
    assert found["function-level"] == ["model.a:2: imports model.b inside a function or class"]
    assert found["dynamic"] == ["model.c:1: imports importlib: a dynamic import hides an edge",
                                "model.c:2: import_module(): a dynamic import hides an edge"]
    assert found["ansible"] == ["stores.s:1: imports ansible.module_utils.basic.AnsibleModule: only the top files "
                                "may import Ansible"]
    assert found["collection"] == [f"workflows.x:1: imports {COLLECTION}.plugins.plugin_utils.progress, collection "
                                   "code outside module_utils"]
    assert found["outside"] == ["misc.m: in no layer folder (errors, api, model, stores, workflows, top files)"]
