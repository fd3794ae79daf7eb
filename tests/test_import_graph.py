"""The package's modules import each other without cycles (module-level and deferred
imports alike), so every module can be read, tested and re-executed on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import activation_wave

PACKAGE = Path(activation_wave.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    names = [f"{target}.{a.name}" for a in node.names]
    return [target] + names


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its source)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                deps.update(_resolve(mod, path.name == "__init__.py", node))
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[mod] = {d for d in deps if d in files and d != mod and not mod.startswith(d + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first = last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_find_cycle_on_a_tiny_graph():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_graph_sees_relative_imports():
    g = import_graph()
    assert "activation_wave.measure.layer_stats" in g["activation_wave.select.selection"]
    assert "activation_wave.core.layers" in g["activation_wave.study.chapters.layer_selection"]


def test_no_import_cycle_in_the_package():
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}; move the shared piece into a module both can import"


#: The package's folders, lowest first: a module may import its own folder and lower ones.
LAYERS = ("core", "models", "engines", "measure", "select", "decode", "draft", "plots", "study", "benchmarks", "cli")


def _layer(module: str) -> int:
    part = module.split(".")[1] if "." in module else ""
    return LAYERS.index(part) if part in LAYERS else len(LAYERS)


def test_every_module_lives_in_a_stage_folder():
    loose = sorted(m for m in import_graph() if m.count(".") == 1 and m.split(".")[1] not in LAYERS)
    assert loose == [], f"modules outside the stage folders {LAYERS}: {loose}"


def test_a_lower_folder_never_imports_a_higher_one():
    bad = sorted(f"{m} -> {d}" for m, deps in import_graph().items() for d in deps
                 if m != "activation_wave" and _layer(d) > _layer(m))
    assert bad == [], "imports against the layering " + " < ".join(LAYERS) + ": " + "; ".join(bad)


def test_no_module_name_appears_twice():
    leaves: dict[str, list[str]] = {}
    for m in import_graph():
        if m.count(".") >= 2 and not m.endswith("__init__"):
            leaves.setdefault(m.rsplit(".", 1)[1], []).append(m)
    twice = {k: v for k, v in leaves.items() if len(v) > 1}
    assert twice == {}, f"module names used twice: {twice}"
