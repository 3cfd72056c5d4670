"""The house stays easy to see: no import cycle among e2e's modules (imports inside functions
and under ``TYPE_CHECKING`` count too: a lazy or type-only import that hides a cycle is still
a cycle), the stages layered (foundation <- results <- analysis, host <- load <- session <-
render <- execute <- pipeline <- commands), a private module (``_name.py``) reached only from
its own package, only ``e2e.commands`` imports typer, and nothing imports the command line.

A package's face (its ``__init__``'s ``__all__``) is what the house itself uses, checked from
the code rather than copied here: at most ``FACE_LIMIT`` names, each imported by some e2e
module outside the package; a name taken from a package is in its face, defined in its
``__init__``, or a module of it. Tests and bench/ import the module that defines what they
use; those that still reach a private module are counted (``PRIVATE_IMPORT_CEILING``)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "e2e"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the e2e modules it imports (``from e2e.pkg import sub`` counts as importing
    the submodule ``e2e.pkg.sub`` when there is one)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.slow
def test_the_graph_sees_lazy_imports():
    graph = import_graph()
    assert "e2e.session" in graph["e2e.commands._run"]  # imported inside the command's body
    # "from e2e.kernels import host_cost", inside a function
    assert "e2e.kernels.host_cost" in graph["e2e.kernels.micro"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert cycles(import_graph()) == []


@pytest.mark.slow
def test_nothing_imports_the_command_line():
    importers = sorted(m for m, deps in import_graph().items() if "e2e.cli" in deps)
    assert importers == []


# --- layers ---------------------------------------------------------------------------------
# Each module's layer, by the longest matching prefix. A module may import its own layer and
# the layers before it, never a later one. nightly and interop are features that cut across
# stages, so their modules are placed one by one; gsm8k and capacity are pipelines (their
# records, statistics and renderers are results', analysis' and render's).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("e2e", "e2e.errors", "e2e.paths", "e2e.console", "e2e.kinds",
                    "e2e.slo", "e2e.redact", "e2e.names", "e2e.config", "e2e.traces", "e2e.arms",
                    "e2e.plan", "e2e.kernels", "e2e.plugin")),
    ("results", ("e2e.results", "e2e.metrics")),
    ("analysis", ("e2e.analysis",)),
    ("host", ("e2e.host",)),
    ("load", ("e2e.load",)),
    ("session", ("e2e.session",)),
    ("render", ("e2e.render", "e2e.nightly.settings", "e2e.interop")),
    ("execute", ("e2e.execute",)),
    ("pipeline", ("e2e.pipeline", "e2e.capacity", "e2e.gsm8k", "e2e.nightly", "e2e.nightly.assess",
                  "e2e.nightly.run", "e2e.nightly.bisect")),
    ("commands", ("e2e.commands", "e2e.cli")),
]


def layer_of(module: str) -> int:
    best, rank = "", -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, i
    assert rank >= 0, f"{module} has no layer: add it to LAYERS"
    return rank


@pytest.mark.slow
def test_every_import_goes_down_the_layers():
    upward = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
              for m, deps in sorted(import_graph().items()) for d in sorted(deps)
              if layer_of(d) > layer_of(m)]
    assert upward == []


def _private(module: str) -> int | None:
    """The index of the first private part of a dotted name (``_x``, not ``__init__``), or None."""
    return next((i for i, p in enumerate(module.split(".")) if i and p.startswith("_")
                 and p != "__init__"), None)


def test_a_private_module_is_reached_only_from_its_own_package():
    """Outside ``e2e/<pkg>/`` nothing imports ``e2e.<pkg>._private`` (or below it)."""
    leaks = []
    for m, deps in sorted(import_graph().items()):
        for d in sorted(deps):
            i = _private(d)
            owner = ".".join(d.split(".")[:i]) if i is not None else None
            if owner is not None and m != owner and not m.startswith(owner + "."):
                leaks.append(f"{m} -> {d}")
    assert leaks == []


@pytest.mark.slow
def test_only_the_commands_import_typer():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "typer" or n.startswith("typer.") for n in names):
                importers.append(name)
    assert sorted({n for n in importers if not n.startswith("e2e.commands")}) == []


# --- faces ----------------------------------------------------------------------------------
ROOT = PACKAGE.parent
FACE_LIMIT = 40
# Names a face keeps though no e2e module outside the package imports them, each with its reason.
FACE_EXCEPTIONS = {
    ("e2e.plugin", "register"): "vLLM's entry point (pyproject's vllm.general_plugins): vLLM "
                                "calls it in every server process",
    ("e2e.commands", "nightly_command"): "for a caller that mounts `e2e nightly` on a typer app "
                                         "of its own",
}


def _packages() -> dict[str, Path]:
    """Every package under e2e: dotted name -> its ``__init__.py``."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("__init__.py"))}


@functools.cache
def _init_names(package: str) -> tuple[tuple[str, ...] | None, frozenset[str]]:
    """(``__all__`` as written, or None; the names the ``__init__`` itself defines)."""
    tree = ast.parse(_packages()[package].read_text(encoding="utf-8"))
    face, defined = None, set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        for t in targets:
            if isinstance(t, ast.Name) and t.id == "__all__":
                face = tuple(ast.literal_eval(node.value))
            elif isinstance(t, ast.Name):
                defined.add(t.id)
    return face, frozenset(defined)


def _faces() -> dict[str, tuple[str, ...]]:
    return {p: names for p in _packages() if (names := _init_names(p)[0]) is not None}


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _sources() -> list[tuple[str, Path]]:
    """(e2e | tests | bench, file) for every Python file of the three."""
    return [(top, p) for top in ("e2e", "tests", "bench")
            for p in sorted((ROOT / top).rglob("*.py"))]


@functools.cache
def taken(path: Path) -> tuple[tuple[str, str | None, bool], ...]:
    """What a file takes from e2e: (module, name, imported) for ``from module import name``
    (imported True) and for ``alias.name`` where ``import e2e.x as alias`` (False); (module,
    None, True) for ``import module``. Dunders (``e2e.__file__``) are left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                out.append((base, a.name, True))
                if _is_module(f"{base}.{a.name}"):
                    aliases[a.asname or a.name] = f"{base}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, None, True))
                bound = a.asname or a.name.split(".")[0]
                aliases[bound] = a.name if a.asname else bound
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in aliases:
                dotted = ".".join([aliases[value.id], *reversed(parts[1:])])
                out.append((dotted, node.attr, False))
    return tuple((m, n, i) for m, n, i in out
                 if (m == "e2e" or m.startswith("e2e.")) and not (n or "").startswith("__"))


def _outside(importer: str, package: str) -> bool:
    return importer != package and not importer.startswith(package + ".")


@pytest.mark.parametrize("package", sorted(_faces()))
def test_each_face_exports_what_it_says(package):
    import importlib

    names = _faces()[package]
    assert list(names) == sorted(set(names)), f"{package}: __all__ sorted, once"
    module = importlib.import_module(package)
    assert [n for n in names if not hasattr(module, n)] == [], f"{package} lacks names it exports"
    assert [n for n in names if n.startswith("_")] == [], f"{package} exports private names"


@pytest.mark.parametrize("package", sorted(_faces()))
def test_a_face_is_small(package):
    names = _faces()[package]
    assert len(names) <= FACE_LIMIT, f"{package}: {len(names)} names (at most {FACE_LIMIT})"


@functools.cache
def face_users() -> dict[tuple[str, str], frozenset[str]]:
    """(package, name in its face) -> the e2e modules outside the package that import it."""
    faces = _faces()
    users: dict[tuple[str, str], set[str]] = {(p, n): set() for p, ns in faces.items() for n in ns}
    for top, path in _sources():
        if top != "e2e":
            continue
        importer = _module_name(path)
        for module, name, _ in taken(path):
            if (module, name) in users and _outside(importer, module):
                users[module, name].add(importer)
    return {k: frozenset(v) for k, v in users.items()}


@pytest.mark.parametrize("package", sorted(_faces()))
def test_every_name_in_a_face_is_used_by_the_house(package):
    """Not only by tests or bench/: they import the module that defines what they use."""
    unused = [n for n in _faces()[package]
              if not face_users()[package, n] and (package, n) not in FACE_EXCEPTIONS]
    assert unused == [], (f"{package}'s face holds names no e2e module outside it imports: "
                          f"{unused}; take them out, and import them from their module")


def test_the_face_exceptions_still_hold():
    stale = [k for k in FACE_EXCEPTIONS
             if k[1] not in _faces().get(k[0], ()) or face_users()[k]]
    assert stale == []


def test_a_name_taken_from_a_package_is_in_its_face():
    """``from e2e.pkg import X``: X is in the face, defined in the ``__init__``, or a module of
    it; a name the face left is imported from the module that defines it."""
    packages = _packages()
    strays = []
    for _, path in _sources():
        for module, name, _ in taken(path):
            if module not in packages or name is None:
                continue
            face, defined = _init_names(module)
            if (name not in (face or ()) and name not in defined
                    and not _is_module(f"{module}.{name}")):
                strays.append(f"{path.relative_to(ROOT)}: {module}.{name}")
    assert strays == []


# Test and bench/ files that import a private module or name of e2e (``e2e.x._y``, ``from e2e.x
# import _y``) reach past what e2e publishes: what they test should live in a public module. The
# ceiling only goes down (15 is the goal: the nightly's records modules, e2e/results/_nightly*.py,
# and e2e.analysis's are still private).
PRIVATE_IMPORT_CEILING = 12


def private_importers() -> list[str]:
    importers = []
    for top, path in _sources():
        if top == "e2e":
            continue
        names = [module if name is None else f"{module}.{name}"
                 for module, name, imported in taken(path) if imported]
        if any(_private(n) is not None for n in names):
            importers.append(str(path.relative_to(ROOT)))
    return importers


def test_tests_and_bench_reaching_private_modules_do_not_grow():
    importers = private_importers()
    assert len(importers) <= PRIVATE_IMPORT_CEILING, (
        f"{len(importers)} test and bench/ files import a private module or name of e2e "
        f"(ceiling {PRIVATE_IMPORT_CEILING}): import the module that defines what they use, "
        f"and make it public: {importers}")
