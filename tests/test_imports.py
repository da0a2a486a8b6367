"""Imports go one way (DESIGN.md): no cycles, no project module imported inside a function to dodge one, and the
layers' directions: ir/errors/source -> stdlib; primitives -> numpy (numba, cupy lazily) and errors; runtime -> ir,
errors and primitives, never the translator or anything else of the frontend."""
from __future__ import annotations

import ast
import os
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = {"phylanx_py": "phylanx_py", "phylanx_py.runtime": "runtime", "phylanx_py.primitives": "primitives"}
# The bottom layer: stdlib only (text_form prints ir nodes without importing ir; _version is read by the runtime;
# turns paces the work beside the calls, which both the translator and the runtime do).
BASE = {"phylanx_py.ir", "phylanx_py.errors", "phylanx_py.source", "phylanx_py.text_form", "phylanx_py._version",
        "phylanx_py.turns"}
# Third-party modules imported on first use only: heavy or optional (numba costs ~0.5 s to import).
LAZY_ONLY = {"numba", "cupy", "graphviz", "sklearn", "psutil", "torch"}


def _modules() -> dict[str, str]:
    mods = {}
    for pkg, folder in PACKAGES.items():
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            if "__pycache__" in dirpath:
                continue
            for f in files:
                if not f.endswith(".py"):
                    continue
                parts = os.path.relpath(os.path.join(dirpath, f), os.path.join(ROOT, folder))[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                name = ".".join([pkg, *parts])
                if folder == "phylanx_py" and name.split(".")[1:2] in (["runtime"], ["primitives"]):
                    continue  # installed from runtime/ and primitives/, not from phylanx_py/
                mods[name] = os.path.join(dirpath, f)
    return mods


MODULES = _modules()


def _owner(target: str) -> str | None:
    """The project module ``target`` names (``a.b.c`` may be a name in module ``a.b``), or None."""
    while target and target not in MODULES:
        target = target.rsplit(".", 1)[0] if "." in target else None
    return target


def _targets(module: str, node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = module if MODULES[module].endswith("__init__.py") else module.rsplit(".", 1)[0]
    if node.level:
        for _ in range(node.level - 1):
            base = base.rsplit(".", 1)[0]
        target = base + ("." + node.module if node.module else "")
    else:
        target = node.module
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


def _imports():
    """(module -> set of imported names at module level, module -> {(name, line)} imported inside functions)."""
    top, local = defaultdict(set), defaultdict(set)
    for module, path in MODULES.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        at_top = set()
        for stmt in tree.body:
            for n in ast.walk(stmt) if isinstance(stmt, (ast.If, ast.Try)) else [stmt]:
                at_top.add(id(n))
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and getattr(n, "module", None) != "__future__":
                for t in _targets(module, n):
                    if id(n) in at_top:
                        top[module].add(t)
                    else:
                        local[module].add((t, n.lineno))
    return top, local


TOP, LOCAL = _imports()


def _edges(include_local: bool) -> dict[str, set[str]]:
    graph = {}
    for m in MODULES:
        names = set(TOP[m]) | ({t for t, _ in LOCAL[m]} if include_local else set())
        graph[m] = {o for o in map(_owner, names) if o is not None} - {m}
    return graph


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_the_project():
    assert {"phylanx_py.ir", "phylanx_py.translate", "phylanx_py.runtime.evaluation",
            "phylanx_py.primitives.registry", "phylanx_py.runtime.tiled.array"} <= set(MODULES)
    assert "phylanx_py.primitives" in {_owner(t) for t in TOP["phylanx_py.runtime.evaluation"]}


def test_no_import_cycles():
    assert _cycles(_edges(include_local=True)) == []


def test_no_project_module_is_imported_inside_a_function():
    hidden = sorted(f"{m}:{line} imports {t}" for m in MODULES for t, line in LOCAL[m] if _owner(t) is not None)
    assert hidden == []


def test_heavy_optional_dependencies_are_imported_lazily():
    eager = sorted(f"{m} imports {t}" for m in MODULES for t in TOP[m] if t.split(".")[0] in LAZY_ONLY)
    assert eager == []


def _outside(module_prefixes, allowed) -> list[str]:
    bad = []
    for m in MODULES:
        if not any(m == p or m.startswith(p + ".") for p in module_prefixes):
            continue
        for t in TOP[m] | {t for t, _ in LOCAL[m]}:
            owner = _owner(t)
            root = t.split(".")[0]
            if owner is not None:
                if not any(owner == a or owner.startswith(a + ".") for a in allowed):
                    bad.append(f"{m} imports {owner}")
            elif root not in sys.stdlib_module_names and root not in allowed:
                bad.append(f"{m} imports {t}")
    return sorted(bad)


def test_ir_errors_and_source_use_the_standard_library_only():
    assert _outside(BASE, BASE) == []


def test_primitives_use_numpy_only():
    # and the bottom layer's errors (stdlib only): the kernel cache's refusal is a px.PhylanxError
    allowed = {"phylanx_py.primitives", "phylanx_py.errors", "numpy", "numba", "cupy"}
    assert _outside(["phylanx_py.primitives"], allowed) == []


def test_the_runtime_never_imports_the_frontend():
    # scipy: Numba's BLAS (``scipy.linalg.cython_blas``), imported only for a kernel that calls BLAS and was built
    # ahead of time (runtime/native/blas_pool.py), as Numba itself imports it for such a kernel
    allowed = BASE | {"phylanx_py.primitives", "phylanx_py.runtime", "numpy", "dask", "distributed", "numba",
                      "cupy", "psutil", "tornado", "tlz", "toolz", "cloudpickle", "scipy"}
    assert _outside(["phylanx_py.runtime"], allowed) == []


def _project_imports(prefix) -> list[str]:
    """The project modules that the modules under ``prefix`` import (at the top or inside functions)."""
    return sorted({f"{m} imports {_owner(t)}" for m in MODULES if m == prefix or m.startswith(prefix + ".")
                   for t in TOP[m] | {t for t, _ in LOCAL[m]} if _owner(t) is not None})


def test_spmd_and_training_share_the_segment_layer_and_never_import_each_other():
    """DESIGN.md "Segments": SPMD loops and training both sit on runtime/segments/; neither imports the other, and
    the segment layer imports neither."""
    spmd, training, segments = "phylanx_py.runtime.spmd", "phylanx_py.runtime.training", "phylanx_py.runtime.segments"
    assert [e for e in _project_imports(spmd) if e.split(" imports ")[1].startswith(training)] == []
    assert [e for e in _project_imports(training) if e.split(" imports ")[1].startswith(spmd)] == []
    assert [e for e in _project_imports(segments)
            if e.split(" imports ")[1].startswith((spmd, training))] == []
    for user in (spmd, training):  # each reaches the driver, the rank context and the ring through the layer
        used = {e.split(" imports ")[1] for e in _project_imports(user)}
        assert {f"{segments}.driver", f"{segments}.rank"} <= used, (user, sorted(used))
