"""The broker's layers (issue 36), read from the imports that run (those under `if TYPE_CHECKING:`
only name types): coordinators reach replicas through a PartitionWriter and import neither the
process wiring (broker/server/) nor the APIs; protocol, log, security and metadata import nothing
above them; no two modules import each other, directly or around a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import broker

ROOT = Path(broker.__file__).parent
# Lowest first: each may import the ones before it (and the settings, broker/config.py and
# broker/topic_config.py), never one after it nor anything else of the broker.
LOW = ("protocol", "log", "security", "metadata")
SETTINGS = {"config", "topic_config"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("broker",) + path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _runtime_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    type_only = {id(n) for node in ast.walk(tree)
                 if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for n in ast.walk(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t.startswith("broker.") and (m := resolve(t)) is not None and m != name:
                found.add(m)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _runtime_imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_coordinators_import_neither_the_server_nor_the_apis():
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m, ts in graph.items() if _layer(m) == "coordinator"
                   for t in ts if _layer(t) in ("server", "apis"))
    assert wrong == []


def test_protocol_log_security_and_metadata_import_nothing_above_them():
    graph = _graph()
    wrong = []
    for m, ts in graph.items():
        if _layer(m) not in LOW:
            continue
        allowed = set(LOW[:LOW.index(_layer(m)) + 1]) | SETTINGS
        wrong += [f"{m} -> {t}" for t in ts if _layer(t) not in allowed]
    assert sorted(wrong) == []


def test_no_import_circle_between_modules():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []
