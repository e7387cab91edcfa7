"""The package's import graph has no cycle: every import counts, lazy ones too.

The graph is read from the source with ``ast``, as ``structure.py`` (the project's
structure check) reads it: an import inside a function counts as much as one at the
top; only imports under ``if TYPE_CHECKING:`` are left out (they never run), and a
package's ``__init__`` re-exporting its own children is not an edge (that is how a
package shows its face, not a design cycle). A name imported from a package's face is an
edge to the module that defines it: the child the ``__init__`` imports it from, or the
module its lazy table (``_LAZY = {name: module}``, loaded by ``__getattr__``) names --
so a face, eager or lazy, hides no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import symfonic_store

PKG = "symfonic_store"
ROOT = Path(symfonic_store.__file__).parent


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def face(pkg: str, tree: ast.Module) -> dict[str, str]:
    """What a package's ``__init__`` hands out: name -> the module it comes from (its
    ``from .child import name`` re-exports and its ``_LAZY`` table)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{pkg}.{node.module}"
        elif (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    names[str(key.value)] = f"{pkg}.{value.value}"
    return names


class Imports(ast.NodeVisitor):
    """The package modules one module imports, lazily or not (not under TYPE_CHECKING)."""

    def __init__(
        self, mod: str, is_pkg: bool, modules: set[str], faces: dict[str, dict[str, str]] | None = None
    ) -> None:
        self.mod, self.is_pkg, self.modules = mod, is_pkg, modules
        self.faces = faces or {}
        self.deps: set[str] = set()

    def _origin(self, base: str, name: str) -> str:
        """The module that defines ``name`` imported from package ``base``'s face."""
        seen = set()
        while name in self.faces.get(base, {}) and base not in seen:
            seen.add(base)
            target = self.faces[base][name]
            if target not in self.faces:  # a plain module (or a child that is no package)
                return target
            base = target
        return base

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _add(self, name: str) -> None:
        while name:
            if name in self.modules and name != self.mod:
                self.deps.add(name)
                return
            name = name.rpartition(".")[0]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith(PKG):
                self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = resolve(self.mod, self.is_pkg, node)
        if not base.startswith(PKG):
            return
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in self.modules else self._origin(base, alias.name))


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = {module_name(f, root): f for f in sorted(root.rglob("*.py"))}
    trees = {mod: ast.parse(path.read_text(encoding="utf-8")) for mod, path in files.items()}
    faces = {mod: face(mod, trees[mod]) for mod, path in files.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        is_init = path.name == "__init__.py"
        visitor = Imports(mod, is_init, set(files), faces)
        visitor.visit(trees[mod])
        graph[mod] = {d for d in visitor.deps if not (is_init and d.startswith(mod + "."))}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_package_has_no_import_cycle() -> None:
    """No two modules of the package import each other, directly or round a loop (lazy imports count)."""
    graph = import_graph()
    assert len(graph) > 50, "the walk found too few modules: the check would be vacuous"
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_a_lazy_import_counts_and_a_type_checking_one_does_not(tmp_path: Path) -> None:
    """The walk sees an import inside a function, skips one under TYPE_CHECKING, and names the cycle it finds."""
    pkg = tmp_path / PKG
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("A = 1\n\ndef f():\n    from .b import B\n    return B\n")
    (pkg / "b.py").write_text("B = 2\n\ndef g():\n    from . import a\n    return a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n"
    )
    graph = import_graph(pkg)
    assert graph[f"{PKG}.c"] == set()
    assert graph[PKG] == set()  # a package re-exporting its children is no edge
    assert cycles(graph) == [[f"{PKG}.a", f"{PKG}.b"]]


def test_a_name_from_a_package_face_is_an_edge_to_its_module(tmp_path: Path) -> None:
    """A name taken from a package's face -- re-exported or in its lazy table -- is an edge
    to the module that defines it, so a face hides no cycle."""
    pkg = tmp_path / PKG
    (pkg / "inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "inner" / "__init__.py").write_text(
        "from .eager import E\n_LAZY = {'L': 'lazy'}\n\ndef __getattr__(name):\n    pass\n"
    )
    (pkg / "inner" / "eager.py").write_text("E = 1\n")
    (pkg / "inner" / "lazy.py").write_text("def f():\n    from ..user import U\n    return U\n")
    (pkg / "user.py").write_text("U = 1\n\ndef g():\n    from .inner import E, L\n    return E, L\n")
    graph = import_graph(pkg)
    assert graph[f"{PKG}.user"] == {f"{PKG}.inner.eager", f"{PKG}.inner.lazy"}
    assert cycles(graph) == [[f"{PKG}.inner.lazy", f"{PKG}.user"]]
