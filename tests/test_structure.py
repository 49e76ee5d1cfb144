"""The codebase keeps one spelling per recorded series, builds PromQL only as trees, and the installed
package stands on its own."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from gpu_execution_pack import catalog

from .conftest import REPO

PACKAGE = REPO / "generator" / "gpu_execution_pack"
CATALOG = PACKAGE / "catalog"
PRINTER = PACKAGE / "promql" / "printer.py"  # the one place PromQL text is written
# The contract table in test_catalog.py states the API's recorded names on purpose, independently.
CONTRACT_TABLE = REPO / "tests" / "test_catalog.py"


def string_literals(path: Path) -> list[tuple[int, str]]:
    """Every string constant in a Python file (f-string parts included), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_recorded_series_name_is_spelled_outside_the_catalog():
    names = sorted(
        (s.name for s in (*catalog.ALL_SERIES, *catalog.SHARDING_SERIES, catalog.PACK_RULES_INFO)),
        key=len,
        reverse=True,
    )
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


# --- PromQL built from strings -----------------------------------------------------------------
# PromQL's functions and aggregation operators (Prometheus 3): a call of one is PromQL.
PROMQL_FUNCTIONS = """
abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp clamp_max
clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year days_in_month deg delta deriv
double_exponential_smoothing exp floor histogram_avg histogram_count histogram_fraction histogram_quantile
histogram_stddev histogram_stdvar histogram_sum holt_winters hour idelta increase info irate label_join
label_replace last_over_time ln log10 log2 mad_over_time max_over_time min_over_time minute month pi
predict_linear present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh sort
sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh time
timestamp vector year
avg bottomk count count_values group limit_ratio limitk max min quantile stddev stdvar sum topk
""".split()  # noqa: SIM905 (a list of words reads best as words)
# An f-string's replacement fields read as this character: PromQL around a field is still PromQL.
HOLE = "\x00"
_NAME = rf"(?:[a-zA-Z_:][a-zA-Z0-9_:]*|{HOLE})"
_DURATION = rf"(?:(?:[0-9]+|{HOLE})(?:ms|[smhdwy]))+"
PROMQL = {
    # name{label="..." or {label=~%q (a Go template's printf), not a template's {{ or a Python {field}
    "a selector with a matcher": re.compile(
        rf"(?<!\{{){_NAME}?\{{\s*(?:[a-zA-Z_][a-zA-Z0-9_]*|{HOLE})\s*(?:=~|!~|!=|=)\s*(?:\"|'|`|%q|{HOLE})"
    ),
    "a range or subquery": re.compile(rf"\[{_DURATION}(?::{_DURATION}?)?\]"),
    "a grouping or matching clause": re.compile(
        r"(?<![\w.])(?:by|without|on|ignoring|group_left|group_right) ?\((?!\))"
    ),
    # not `rate()` in prose, nor a Python method or a Grafana variable
    "a PromQL function call": re.compile(rf"(?<![\w.$])(?:{'|'.join(PROMQL_FUNCTIONS)})\((?!\))"),
}


def code_strings(source: str) -> list[tuple[int, str]]:
    """The string values a Python module computes with, with their lines: constants, and f-strings whole
    (each replacement field read as ``HOLE``); docstrings and other bare string statements, which
    only document, are left out."""
    tree = ast.parse(source)
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    found, parts = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts.update(id(v) for v in node.values)
            if id(node) not in bare:
                text = "".join(v.value if isinstance(v, ast.Constant) else HOLE for v in node.values)
                found.append((node.lineno, text))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare | parts:
            found.append((node.lineno, node.value))
    return found


def promql_in(source: str) -> list[tuple[int, str, str]]:
    """(line, what, text) for every string in ``source`` that reads as PromQL."""
    hits = []
    for line, text in code_strings(source):
        what = next((what for what, pattern in PROMQL.items() if pattern.search(text)), None)
        if what:
            hits.append((line, what, text.replace(HOLE, "{…}")))
    return hits


def test_no_promql_is_written_as_a_string_outside_the_printer():
    sources = sorted(p for p in PACKAGE.rglob("*.py") if p != PRINTER)
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}: {text!r}"
        for path in sources
        for line, what, text in promql_in(path.read_text(encoding="utf-8"))
    ]
    assert len(sources) > 40
    assert not found, "build PromQL as a promql tree and print it with promql.render:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "planted",
    [
        'Q = "sum(rate(x[5m]))"',
        "Q = f'{metric}{{execution_id=\"{eid}\"}}'",
        'Q = f"count_over_time({presence}[{bucket}s])"',
        "Q = '{__name__=~\"execution_gpu:.+\"}'",
        "Q = f'printf \"{name}{{UUID=%q}}\" $labels.UUID'",
        "Q = 'a / on (UUID) group_left () b'",
        'Q = f"x[5m:{step}s]"',
        "Q = 'vector(1)'",
    ],
)
def test_the_check_finds_a_planted_promql_string(planted: str):
    assert promql_in(planted + "\n")


@pytest.mark.parametrize(
    "innocent",
    [
        'T = "GPU {{ $labels.gpu }} on {{ $labels.hostname }}"',  # a Go template, not a query
        "T = 'job=~\".*dcgm.*\"'",  # config text as the user writes it; the loader parses it
        "T = f'panels[{i}]'",  # a Python index in a message
        "T = 'Window of rate() over counters'",  # prose naming a function
        "T = '{\"name\": 1}'",
        'def f():\n    """Reads ``sum by (job) (rate(x[5m]))``."""\n',  # a docstring documents
    ],
)
def test_the_check_leaves_other_strings_alone(innocent: str):
    assert not promql_in(innocent + "\n")


QUERIES = PACKAGE / "dashboards" / "queries.py"  # the one place Grafana's label_values() is written


def test_grafana_label_values_queries_are_built_only_by_the_typed_builder():
    """Grafana's variable queries come from ``dashboards.queries.label_values(selector, label)``, which prints
    the selector tree; no f-string elsewhere wraps a rendered selector."""
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != QUERIES
        for line, text in code_strings(path.read_text(encoding="utf-8"))
        if "label_values(" in text
    ]
    assert not found, "build it with dashboards.queries.label_values:\n" + "\n".join(found)


CONFIG = PACKAGE / "config"


# rules/routing.py is being rewritten on another branch (one matcher grammar); it moves onto the scope then.
def cluster_label_reads(source: str) -> list[int]:
    """The lines where ``source`` (Python, or else a Jinja template) reads the config's ``cluster_label``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a template: its expressions name the config ``cfg``
        return [i for i, line in enumerate(source.splitlines(), 1) if re.search(r"\bcfg\.cluster_label\b", line)]
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "cluster_label"]


def test_cluster_label_is_read_only_through_the_cluster_scope():
    """One spelling of "this cluster's matcher": every reader asks ``config.cluster_scope(cfg)``, none
    branches on ``cfg.cluster_label`` itself."""
    sources = sorted(p for p in (*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.j2")) if CONFIG not in p.parents)
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sources
        for line in cluster_label_reads(path.read_text(encoding="utf-8"))
    ]
    assert len(sources) > 40
    assert not found, "read the cluster through config.cluster_scope(cfg), not cfg.cluster_label:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "planted",
    [
        "x = [match(cfg.cluster_label, c)] if cfg.cluster_label else []",
        "label = self.cfg.cluster_label",
        "{% if cfg.cluster_label %}clusters{% endif %}",
    ],
)
def test_the_cluster_check_finds_a_planted_read(planted: str):
    assert cluster_label_reads(planted + "\n")


def test_the_cluster_check_leaves_prose_alone():
    assert not cluster_label_reads('HELP = "the cluster (value of cluster_label) that holds it"\n')


@pytest.mark.single_version  # the wheel's packaging
@pytest.mark.e2e
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


def test_every_file_the_run_starts_first_exists():
    """conftest.SLOW_FILES_FIRST names files by their names: a renamed one would silently drop to the end."""
    from .conftest import SLOW_FILES_FIRST

    assert [name for name in SLOW_FILES_FIRST if not (REPO / "tests" / name).is_file()] == []
