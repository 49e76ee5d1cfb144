"""Two tenants' executions of one id, as Kubernetes makes them: Job names repeat across namespaces.

The execution and model rollups, and the alerts read from them, must count each tenant's execution apart: the
shipped rule files, run by the real promtool over the raw series such a store holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog, promtool
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.output import write_all
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.rules.files import rule_files as generated_rule_files
from gpu_execution_pack.scenario import oracle
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.render import Renderer, expand_notation
from gpu_execution_pack.testsuites import config_variants
from gpu_execution_pack.testsuites.alerts import alert_suite

from .conftest import run_promtool_test, suite_failures

pytestmark = [pytest.mark.e2e, pytest.mark.single_version, pytest.mark.usefixtures("promtool_available")]
REPO = Path(__file__).resolve().parent.parent
JOB = "finetune-llama"  # one Job name in two namespaces

# research's Job idles on one GPU for 40 minutes while physics' keeps two GPUs of another host busy: merged
# by id, the mean utilisation is about two thirds and nothing is underused.
RESEARCH = Execution(JOB, (Gpu("ha", 0),), ("idle",) * 8, namespace="research")
PHYSICS = Execution(JOB, (Gpu("hb", 0), Gpu("hb", 1)), ("compute",) * 4, namespace="physics")
SCENARIO = Scenario("two tenants, one id", "", (Host("ha"), Host("hb")), (RESEARCH, PHYSICS))
# Each namespace's Job of that name time-slices one A10 with the other (per-process values), the two filling its
# framebuffer together: each one's memory alerts must name the other, which shares its id, not its tenant. Its
# pods are named under kubernetes attribution (kube_pod_labels): dcgm-exporter's virtual-GPU path copies no pod label.
A10 = Gpu("hc", 0, model="NVIDIA A10", mem_total_mib=22 * 1024)
SLICED = Host("hc", exporter_pod="nvidia-dcgm-exporter-q7w2e", virtual_gpus=True)
SHARING = Scenario(
    "two tenants' Jobs of one name share a GPU",
    "",
    (SLICED,),
    tuple(Execution(JOB, (A10,), ("sliced_light", "sliced_fill"), namespace=n) for n in ("research", "physics")),
)


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
    test = {
        "interval": f"{STEP_SECONDS}s",
        "input_series": [{"series": s.selector, "values": expand_notation(s.samples)} for s in series],
        "promql_expr_test": checks,
    }
    run_suite(tmp_path, cfg, test)


def test_a_gpu_time_sliced_by_two_tenants_jobs_of_one_name_names_the_other_in_the_memory_alerts(tmp_path: Path):
    """The alert oracle's descriptions (scenario.alerting) name the other namespace's Job, and the shipped rules,
    run by promtool over the raw series (kube_pod_labels naming each pod's Job), render them so."""
    cfg = config_from_mapping({"attribution": {"mode": "kubernetes"}})
    [test] = alert_suite(cfg, [SHARING])
    other = {"research": "physics", "physics": "research"}
    fired: set[str] = set()
    for check in test["alert_rule_test"]:
        if check["alertname"] not in ("GpuExecutionGpuMemoryHigh", "GpuExecutionGpuMemoryFillingUp"):
            continue
        for alert in check["exp_alerts"]:
            own = alert["exp_labels"][cfg.api.tenant_label]
            description = alert["exp_annotations"]["description"]
            assert description.endswith(f"it is shared with {JOB} (namespace {other[own]})."), description
            fired.add(own)
    assert fired == {"research", "physics"}
    run_suite(tmp_path, cfg, test)


def test_a_gpu_shared_where_no_series_carries_a_tenant_names_the_other_holders_by_id(tmp_path: Path):
    """Bare metal or Slurm: no tenant label anywhere. The alert's own tenant is then "" (a selector's "the label
    is absent"), so the clause still names every other holder, by id alone, and not the alerting one."""
    gpu = {"hostname": "bm1", "UUID": "GPU-bm1-0", "gpu": "0", "modelName": "NVIDIA A100-SXM4-80GB"}

    def series(name: str, execution: str, values: str) -> dict[str, str]:
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted({**gpu, "execution_id": execution}.items()))
        return {"series": f"{name}{{{labels}}}", "values": values}

    fill, share = catalog.GPU_DEVICE_MEMORY_UTILIZATION.name, catalog.GPU_SHARE.name  # what the alert reads
    holders = ("slurm-17", "slurm-18", "slurm-19")
    alerts = [
        {
            "exp_labels": {**gpu, "execution_id": own, "severity": "warning"},
            "exp_annotations": {
                "summary": "An execution's GPU memory is nearly full; "
                "its next allocations may fail with out-of-memory.",
                "description": f"Execution {own} has used 97% of the memory of GPU 0 (NVIDIA A100-SXM4-80GB, "
                f"GPU-bm1-0) on bm1 for 2m (threshold 95%). Every execution holding the GPU counts: it is shared "
                f"with {', '.join(h for h in holders if h != own)}.",
                "runbook_url": "docs/runbook.md#gpuexecutiongpumemoryhigh",
            },
        }
        for own in holders
    ]
    test = {
        "interval": "1m",
        "input_series": [
            *(series(fill, h, "0.97x10") for h in holders),
            *(series(share, h, "0.333x10") for h in holders),
        ],
        "alert_rule_test": [{"eval_time": "5m", "alertname": "GpuExecutionGpuMemoryHigh", "exp_alerts": alerts}],
    }
    run_promtool_test(tmp_path, {tmp_path / "alerts.rules.yml": (REPO / "rules/alerts.rules.yml").read_text()}, [test])


@pytest.mark.parametrize("mode", ["label", "kubernetes"])
def test_the_test_command_s_suites_pass_for_a_config_whose_tenant_is_another_label(tmp_path: Path, mode: str):
    """``gpu-execution-pack test --config`` with ``api.tenant_label: team``: the scenarios carry each workload's
    tenant in that label (in kubernetes mode beside the pod's ``namespace``, which the pod join reads), and the
    oracle expects it there, on the per-GPU series, the rollups, the alerts and their descriptions. The oracle
    named ``namespace`` whatever the config said, so every such config's suites failed."""
    cfg = config_from_mapping({"api": {"tenant_label": "team"}, "attribution": {"mode": mode}}, "test")
    # A training job, in kubernetes mode two tenants' Jobs time-slicing one GPU (their memory alerts name each
    # other's tenant; under label attribution dcgm-exporter's virtual-GPU series carry no execution id, and the
    # label-mode suites hold no such pair), and the AMD fleet (its pods' tenant).
    held = frozenset({"train-0001", "vgpufull-0037"})
    variants = config_variants(cfg)
    assert any(e.id == "vgpufull-0037" for s in variants[0].alert_library() for e in s.executions) == (
        mode == "kubernetes"
    )
    assert suite_failures(variants, tmp_path, executions=held) == ""


def run_suite(tmp_path: Path, cfg: Config, test: dict) -> None:
    """promtool's run of ``test`` over the shipped rule files, their groups in dependency order."""
    suite = tmp_path / "tenants.test.yml"
    rules = rule_files()
    if cfg != Config():  # the rule files this config generates, not the shipped defaults
        rules = sorted(write_all(generated_rule_files(cfg, tmp_path / "rules")))
    suite.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(p) for p in rules],
                "evaluation_interval": f"{STEP_SECONDS}s",
                "group_eval_order": [g.name for g in all_groups(cfg)],
                "tests": [test],
            },
            sort_keys=False,
        )
    )
    result = promtool.run(["test", "rules", str(suite)])
    assert result.ok, result.output


def selector(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"
