"""promtool unit tests for the rules, built from the scenario library and its oracle.

``rules/tests/default.test.yml`` tests the rules in ``rules/`` (built-in defaults). Each other
attribution variant gets its own rule files under ``rules/tests/variants/<name>/`` and a test
file beside the default one, so every mode is proven on the same scenarios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator import catalog
from generator.alerttests import alert_test_file
from generator.config import Config, config_from_mapping
from generator.output import yaml_document
from generator.promql import duration
from generator.rulefiles import all_groups, rule_files
from generator.scenario import expected, library, render
from generator.scenario.model import STEP_SECONDS, Scenario

SOURCE = "generator/ruletests.py and generator/scenario/"

# Series whose value is a mean or sum of fractions: Prometheus 2.x accumulates means
# incrementally and 3.x uses compensated sums, and the order of a sum is its own, so the last
# bit differs between versions and from Python's. They are compared rounded to ROUND_TO,
# which still tells any real error apart.
AVERAGED = frozenset({"execution:gpu_utilization_ratio:avg", "execution_model:gpu_utilization_ratio:sum"})
ROUND_TO = 1e-9


def rounded(value: float) -> float:
    """``value`` as PromQL's round(value, ROUND_TO) computes it."""
    inverse = 1.0 / ROUND_TO
    return math.floor(value * inverse + 0.5) / inverse


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: dict[str, Any]
    scenarios: tuple[Scenario, ...]

    @property
    def config(self) -> Config:
        return config_from_mapping(self.overrides, f"variant {self.name}")


def variants() -> list[Variant]:
    attribution = tuple(library.attribution_suite())
    return [
        Variant("default", {}, tuple(library.default_suite())),
        Variant("mapping", {"attribution": {"mode": "mapping"}}, attribution),
        Variant("kubernetes", {"attribution": {"mode": "kubernetes"}}, attribution),
        # dcgm-exporter's --hpc-job-mapping-dir label, with scrape selectors set.
        Variant(
            "hpc_job",
            {"execution_label": "hpc_job", "selectors": {"dcgm": 'job="dcgm-exporter"', "node": 'job="node"'}},
            attribution,
        ),
    ]


def _labels(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def scenario_test(scenario: Scenario, cfg: Config) -> dict[str, Any]:
    """One promtool test: the scenario's raw series, and every recorded series checked mid-phase."""
    checks = []
    records = [s.record for s in catalog.ALL_SERIES]
    for minute in expected.eval_minutes(scenario):
        want = expected.expected(scenario, minute)
        steady = expected.hosts_steady(scenario, minute)
        for record in records:
            if record.startswith("execution_node:") and record != "execution_node:gpu_count" and not steady:
                continue  # host load changes within the rate window: not a clean check
            samples = sorted(want.get(record, []), key=lambda s: sorted(s.labels.items()))
            if record in AVERAGED:
                exp = [{"labels": _labels("", s.labels), "value": rounded(s.value)} for s in samples]
                checks.append(
                    {"expr": f"round({record}, {ROUND_TO})", "eval_time": duration(minute * 60), "exp_samples": exp}
                )
                continue
            checks.append(
                {
                    "expr": record,
                    "eval_time": duration(minute * 60),
                    "exp_samples": [{"labels": _labels(record, s.labels), "value": s.value} for s in samples],
                }
            )
        d = cfg.dashboards
        price = expected.prices(scenario, minute, dict(d.price_per_gpu_hour), d.default_price_per_gpu_hour)
        checks.append(
            {
                "expr": catalog.PRICE_SERIES,
                "eval_time": duration(minute * 60),
                "exp_samples": [{"labels": _labels(catalog.PRICE_SERIES, s.labels), "value": s.value} for s in price],
            }
        )
        for gpu in scenario.unowned_gpus:  # a GPU nobody holds has no execution_gpu: series
            instance = f', GPU_I_ID="{gpu.mig_instance}"' if gpu.mig_instance else ""
            checks.append(
                {
                    "expr": f'{{__name__=~"execution_gpu:.+", UUID="{gpu.uuid}"{instance}}}',
                    "eval_time": duration(minute * 60),
                    "exp_samples": [],
                }
            )
    return {
        "name": scenario.name,
        "interval": f"{STEP_SECONDS}s",
        "input_series": render.input_series(scenario, cfg),
        "promql_expr_test": checks,
    }


def promtool_test_files(rules_dir: Path) -> dict[Path, str]:
    """Every generated test file and every variant's rule files, keyed by path."""
    return recording_test_files(rules_dir) | alert_test_file(Config(), rules_dir)


def recording_test_files(rules_dir: Path, only: str = "") -> dict[Path, str]:
    """The recording rules' test file per attribution variant (or just ``only``), and the variants' rule files."""
    tests_dir = rules_dir / "tests"
    files: dict[Path, str] = {}
    for v in variants():
        if only and v.name != only:
            continue
        cfg = v.config
        if v.name == "default":
            rule_paths = list(rule_files(cfg, rules_dir))
        else:
            variant_files = rule_files(cfg, tests_dir / "variants" / v.name)
            files.update(variant_files)
            rule_paths = list(variant_files)
        doc = {
            "rule_files": [
                str(p.relative_to(tests_dir))
                if p.is_relative_to(tests_dir)
                else str(Path("..") / p.relative_to(rules_dir))
                for p in rule_paths
            ],
            "evaluation_interval": f"{STEP_SECONDS}s",
            # Dependency order, as the rules are written; promtool otherwise sorts groups by name.
            "group_eval_order": [g.name for g in all_groups(cfg)],
            "tests": [scenario_test(s, cfg) for s in v.scenarios],
        }
        files[tests_dir / f"{v.name}.test.yml"] = yaml_document(doc, SOURCE)
    return files
