"""Two tenants' executions of one id, as Kubernetes makes them: Job names repeat across namespaces.

The execution and model rollups, and the alert read from them, must count each tenant's execution apart: the
shipped rule files, run by the real promtool over the raw series such a store holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog, promtool
from gpu_execution_pack.config import Config
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario import oracle
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.render import Renderer, expand_notation

pytestmark = [pytest.mark.e2e, pytest.mark.single_version, pytest.mark.usefixtures("promtool_available")]
REPO = Path(__file__).resolve().parent.parent
JOB = "finetune-llama"  # one Job name in two namespaces

# research's Job idles on one GPU for 40 minutes while physics' keeps two GPUs of another host busy: merged
# by id, the mean utilisation is about two thirds and nothing is underused.
RESEARCH = Execution(JOB, (Gpu("ha", 0),), ("idle",) * 8, namespace="research")
PHYSICS = Execution(JOB, (Gpu("hb", 0), Gpu("hb", 1)), ("compute",) * 4, namespace="physics")
SCENARIO = Scenario("two tenants, one id", "", (Host("ha"), Host("hb")), (RESEARCH, PHYSICS))


def rule_files() -> list[Path]:
    return sorted((REPO / "rules").glob("*.rules.yml"))


def test_each_tenants_execution_of_one_id_is_rolled_up_and_alerted_on_apart(tmp_path: Path):
    cfg = Config()
    minutes = 38  # both running; research idle for longer than GpuUnderutilized's `for`
    assert minutes * 60 >= 30 * 60 + 5 * 60 and minutes < SCENARIO.window_minutes
    at = f"{minutes}m"

    def of(namespace: str, **more: str) -> dict[str, str]:
        return {catalog.EXECUTION_LABEL: JOB, cfg.api.tenant_label: namespace, **more}

    def check(name: str, *samples: tuple[dict[str, str], float]) -> dict:
        expected = [{"labels": selector(name, labels), "value": value} for labels, value in samples]
        return {"expr": f'{name}{{execution_id="{JOB}"}}', "eval_time": at, "exp_samples": expected}

    # The idle Job's host CPU while it underuses its GPU is its own host's, not the busy Job's host's (the oracle's
    # host CPU: the two differ, so a rule reading the id's hosts gets the other's).
    idle_host, busy_host = (oracle.host_truth(SCENARIO, SCENARIO.host(h), minutes) for h in ("ha", "hb"))
    idle_cpu, busy_cpu = idle_host[catalog.NODE_CPU_UTILIZATION], busy_host[catalog.NODE_CPU_UTILIZATION]
    assert idle_cpu < busy_cpu
    model = catalog.MODEL_LABEL
    research_model, physics_model = RESEARCH.gpus[0].model, PHYSICS.gpus[0].model
    checks = [
        check(catalog.EXECUTION_GPU_COUNT.name, (of("physics"), 2), (of("research"), 1)),
        check(catalog.EXECUTION_HOST_COUNT.name, (of("physics"), 1), (of("research"), 1)),
        check(catalog.EXECUTION_GPU_UTILIZATION_AVG.name, (of("physics"), 0.97), (of("research"), 0)),
        check(catalog.EXECUTION_CPU_WHILE_UNDERUTILIZED.name, (of("research"), idle_cpu)),
        check(
            catalog.MODEL_GPU_COUNT.name,
            (of("physics", **{model: physics_model}), 2),
            (of("research", **{model: research_model}), 1),
        ),
        {
            "expr": 'ALERTS{alertname="GpuExecutionGpuUnderutilized", alertstate="firing"}',
            "eval_time": at,
            "exp_samples": [
                {
                    "labels": selector(
                        "ALERTS",
                        {
                            "alertname": "GpuExecutionGpuUnderutilized",
                            "alertstate": "firing",
                            "severity": cfg.alerts.gpu_underutilized.severity,
                            **of("research"),
                        },
                    ),
                    "value": 1,
                }
            ],
        },
    ]
    series = Renderer(SCENARIO, cfg).all_series()
    files = rule_files()
    suite = tmp_path / "tenants.test.yml"
    suite.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(p) for p in files],
                "evaluation_interval": f"{STEP_SECONDS}s",
                "group_eval_order": [g.name for g in all_groups(cfg)],
                "tests": [
                    {
                        "interval": f"{STEP_SECONDS}s",
                        "input_series": [{"series": s.selector, "values": expand_notation(s.samples)} for s in series],
                        "promql_expr_test": checks,
                    }
                ],
            },
            sort_keys=False,
        )
    )
    result = promtool.run(["test", "rules", str(suite)])
    assert result.ok, result.output


def selector(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"
