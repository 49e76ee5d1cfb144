"""The package keeps its architecture: layered imports, no import cycles, short functions, no dead code.

docs/architecture.md draws the layers; ``LAYERS`` below is the same picture as data. A module may
import from its own subpackage and from any lower layer, never from a higher one or from a
sibling subpackage of its own layer, and no two modules may import each other, directly or
through others.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpu_execution_pack.scenario import oracle

from .conftest import REPO

PACKAGE = "gpu_execution_pack"
SOURCE = REPO / "generator"

# Lowest first. A name is a subpackage, or a top-level module of the package ("" is its __init__).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"", "promql", "hashed", "extras"}),  # the version, PromQL, hashed_once, the optional extras
    frozenset({"catalog"}),  # the domain model: signals, units, recorded series
    frozenset({"config", "output", "promtool"}),  # the user's config; writing files; running promtool
    frozenset({"rules", "dashboards", "scenario", "query"}),  # what the pack generates; test truth; reads
    frozenset({"testsuites", "report", "docs", "doctor", "demo"}),  # suites; the report; docs; doctor; demo
    frozenset({"archive"}),  # ended executions' records (the report's document and series) in SQLite or PostgreSQL
    frozenset({"api"}),  # the HTTP layer over query and report
    frozenset({"build"}),  # `make`'s steps
    frozenset({"cli"}),  # the command line
    frozenset({"__main__"}),  # python -m gpu_execution_pack
)
MAX_FUNCTION_LINES = 80


def module_name(path: Path, root: Path = SOURCE) -> str:
    """``gpu_execution_pack.rules.alerts`` for generator/gpu_execution_pack/rules/alerts.py."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = SOURCE, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of a package under ``root``, by its dotted name."""
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def imports_of(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The package's modules that ``name`` imports, anywhere in the file (function-level imports too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import module` imports the module; `from pkg import name` imports pkg.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        yield from (t for t in targets if t in known and t != name)


def import_graph(known: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Who imports whom among ``known`` modules (the package's by default)."""
    known = modules() if known is None else known
    return {name: set(imports_of(name, path, known)) for name, path in known.items()}


def unit(module: str) -> str:
    """The subpackage or top-level module a module belongs to ("" for the package's __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(module: str) -> int:
    for index, names in enumerate(LAYERS):
        if unit(module) in names:
            return index
    raise AssertionError(f"{module} is in no layer: add {unit(module)!r} to LAYERS and docs/architecture.md")


def layering_errors(graph: dict[str, set[str]]) -> list[str]:
    """Imports that run up a layer or sideways into a sibling subpackage."""
    errors = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            if unit(source) == unit(target) or target == PACKAGE:
                continue
            if layer(target) > layer(source):
                errors.append(f"{source} imports {target}, a higher layer")
            elif layer(target) == layer(source):
                errors.append(f"{source} imports {target}, a sibling in its own layer")
    return errors


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a set of modules
    that import each other directly or through one another."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_import_runs_down_the_layers():
    graph = import_graph()
    assert len(graph) > 50 and sum(map(len, graph.values())) > 100  # the graph was really read
    assert not layering_errors(graph), "\n".join(layering_errors(graph))


def test_every_layer_entry_names_a_subpackage_or_module_that_exists():
    units = {unit(name) for name in modules()}
    assert {name for names in LAYERS for name in names} - units == set()


def test_no_modules_import_each_other():
    assert not cycles(import_graph()), cycles(import_graph())


@pytest.mark.parametrize("folder", ["bench", "harness"])
def test_the_benchmark_and_the_harnesses_have_no_import_cycles(folder: str):
    graph = import_graph(modules(REPO, folder))
    assert len(graph) > 2 and any(graph.values())  # the folder's imports were really read
    assert not cycles(graph), cycles(graph)


def test_the_checks_find_an_upward_import_and_a_cycle():
    graph = {
        f"{PACKAGE}.catalog.series": {f"{PACKAGE}.rules.recording"},  # up from the catalog
        f"{PACKAGE}.rules.recording": {f"{PACKAGE}.dashboards.house"},  # sideways
        f"{PACKAGE}.report.figures": {f"{PACKAGE}.report.verdicts"},
        f"{PACKAGE}.report.verdicts": {f"{PACKAGE}.report.figures"},  # a cycle within a layer
    }
    assert len(layering_errors(graph)) == 2
    assert cycles(graph) == [[f"{PACKAGE}.report.figures", f"{PACKAGE}.report.verdicts"]]


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_function_in_the_package_is_longer_than_80_lines():
    found = [hit for path in modules().values() for hit in long_functions(path)]
    assert not found, "split these functions:\n" + "\n".join(found)


def test_the_length_check_finds_a_long_function(tmp_path: Path):
    sample = tmp_path / "long.py"
    body = "    x = 1\n" * (MAX_FUNCTION_LINES - 1)
    sample.write_text(f"def short():\n{body}\n\ndef long():\n{body}    return x\n")
    assert long_functions(sample) == [f"{sample}:{MAX_FUNCTION_LINES + 3} long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_vulture_finds_no_dead_code():
    """vulture at its default confidence (60 %); vulture_whitelist.py lists only what a framework calls."""
    vulture = shutil.which("vulture", path=str(Path(sys.executable).parent))
    if vulture is None:
        pytest.fail("vulture is not installed: it is in the dev extra (pip install -e '.[dev]')")
    # The phase table's load fields the oracle reads by name (``<signal>_<unit>``: oracle.LOAD_SIGNALS).
    by_name = ",".join(name for name, _ in oracle.LOAD_SIGNALS.values())
    proc = subprocess.run(
        [vulture, "generator", "vulture_whitelist.py", "--ignore-names", by_name],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, "dead code (remove it, or whitelist what a framework calls):\n" + proc.stdout
