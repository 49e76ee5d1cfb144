"""The codebase keeps one spelling per recorded series, and the installed package stands on its own."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

from gpu_execution_pack import catalog

from .conftest import REPO

CATALOG = REPO / "generator" / "gpu_execution_pack" / "catalog"
# The contract table in test_catalog.py states the API's recorded names on purpose, independently.
CONTRACT_TABLE = REPO / "tests" / "test_catalog.py"


def string_literals(path: Path) -> list[tuple[int, str]]:
    """Every string constant in a Python file (f-string parts included), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_recorded_series_name_is_spelled_outside_the_catalog():
    names = sorted((s.name for s in catalog.ALL_SERIES), key=len, reverse=True)
    spelled = re.compile("|".join(re.escape(n) for n in names) + r"(?![a-zA-Z0-9_:])")
    sources = [p for d in ("generator", "bench", "tests") for p in (REPO / d).rglob("*.py")]
    sources += list((REPO / "generator").rglob("*.j2"))
    found = []
    for path in sources:
        if path.parent == CATALOG or path == CONTRACT_TABLE:
            continue
        if path.suffix == ".py":
            hits = [(line, m.group(0)) for line, text in string_literals(path) for m in spelled.finditer(text)]
        else:
            hits = [
                (i, m.group(0)) for i, ln in enumerate(path.read_text().splitlines(), 1) for m in spelled.finditer(ln)
            ]
        found += [f"{path.relative_to(REPO)}:{line}: {name}" for line, name in hits]
    assert len(sources) > 40
    assert not found, "select recorded series through the catalog's Series objects:\n" + "\n".join(found)


def test_the_check_finds_a_spelled_name(tmp_path: Path):
    sample = tmp_path / "x.py"
    sample.write_text(f'QUERY = "sum({catalog.GPU_POWER.name})"\n')
    names = [s.name for s in catalog.ALL_SERIES]
    assert any(n in text for _, text in string_literals(sample) for n in names)


def test_the_wheel_imports_beside_a_local_generator_folder(tmp_path: Path):
    """Installed from a wheel, the package is found by its own name even where a `generator/` folder shadows one."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
    )
    [wheel] = wheels.glob("gpu_execution_pack-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
    )
    ops = tmp_path / "ops-repo"
    (ops / "generator").mkdir(parents=True)
    (ops / "generator" / "__init__.py").write_text("raise SystemExit('the ops repo generator/ was imported')\n")
    code = (
        "import gpu_execution_pack, gpu_execution_pack.docs.runbook as r; "
        "print(gpu_execution_pack.__file__); print(len(r.render()))"
    )
    user = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a developer's path is not the wheel
    proc = subprocess.run([str(python), "-c", code], cwd=ops, capture_output=True, text=True, check=False, env=user)
    assert proc.returncode == 0, proc.stderr
    location, length = proc.stdout.split()
    assert str(REPO) not in location and "site-packages" in location  # the wheel, not the checkout
    assert int(length) > 1000  # package data (the runbook template) found from the package
