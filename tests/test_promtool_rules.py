"""The real promtool accepts the rules, passes the generated tests, and fails them on broken rules."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog, cli, promtool, testsuites
from gpu_execution_pack.catalog import Formula, Unit, signal
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.output import command, write_all
from gpu_execution_pack.promql import aggregate
from gpu_execution_pack.rules.files import all_groups, rule_files
from gpu_execution_pack.rules.groups import AlertRule
from gpu_execution_pack.scenario import alerting, expected, library
from gpu_execution_pack.scenario.alerting import PREFIX, Timelines, World
from gpu_execution_pack.testsuites.alerts import alert_suite, store_test
from gpu_execution_pack.testsuites.recording import recording_suite, scenario_test

from .conftest import REPO, env_without_promtool, suite_failures

pytestmark = pytest.mark.usefixtures("promtool_available")


def test_committed_rule_files_pass_promtool_check():
    files = sorted((REPO / "rules").glob("*.rules.yml"))
    assert len(files) == 5
    result = promtool.check_rules(files)
    assert result.output.count("SUCCESS") == len(files)


@pytest.mark.e2e
def test_the_test_command_builds_every_suite_and_promtool_passes_them(capsys: pytest.CaptureFixture[str]):
    """`make test` builds the suites into build/promtool (as `gpu-execution-pack test` does) and runs them."""
    build = REPO / "build" / "promtool"
    assert cli.main(["test", "--build-dir", str(build)]) == 0
    suites = {p.name for p in build.glob("*.test.yml")}
    assert suites == {
        f"{v}.test.yml"
        for v in (
            "default",
            "default-alerts",
            "default-amd",
            "scrape_identity",
            "scrape_identity-alerts",
            "scrape_identity-amd",
            "mapping",  # the AMD fleet's executions arrive by job_id or pod, not by a mapping
            "kubernetes",
            "kubernetes-alerts",  # the pair filling its virtual GPUs alone (library.pod_mapped_alert_suite)
            "kubernetes-amd",
            "hpc_job",
            "hpc_job-amd",
            "clusters",
            "clusters-amd",
            "cpu_rate_interval",
            "cpu_rate_interval-amd",
        )
    }
    passed = [
        line.removeprefix("passed: ") for line in capsys.readouterr().out.splitlines() if line.startswith("passed: ")
    ]
    assert sorted(Path(p).name for p in passed) == sorted([*suites, "contract.test.yml"])  # and the hand-written one


def test_no_generated_suite_is_committed():
    committed = sorted(p.name for p in (REPO / "rules" / "tests").iterdir())
    assert committed == ["contract.test.yml"]


def _unprefixed(check: dict, prefix: str) -> str:
    """A check as its scenario's own test spells it: its names without the store's prefix."""
    return json.dumps(check, sort_keys=True).replace(prefix, "")


def _unscoped(expr: str, prefix: str) -> str:
    """``expr`` without the matcher that selects one scenario's names in a store (``recording.own_names``)."""
    for scope in (f'execution_id=~"{prefix}.+"', f'hostname=~"{prefix}.+"', f'UUID=~"GPU-{prefix}.+"'):
        expr = expr.replace("{" + scope + "}", "").replace(scope + ", ", "")
    return expr


def test_an_alert_store_checks_each_scenario_at_its_own_instants_with_its_own_alerts():
    """The alert suite holds the scenarios in a few stores: each scenario's alerts are checked at every instant
    its own test checks, and found as its own test finds them. Listed beside the others' alerts; or, where
    another scenario is not robust for that alert then and this one fires none of it, by an expression test
    of this scenario's own alerts alone, which must find none."""
    cfg, scenarios = Config(), library.alert_suite()
    stores = alert_suite(cfg, scenarios, together=True)
    assert len(stores) < len(scenarios) / 4  # the point of it: promtool's time is each test's steps
    held = {name for store in stores for name in store["name"].split(" + ")}
    assert held == {f"s{n:02d}-{s.name}" for n, s in enumerate(scenarios, 1)}
    quiet_checks = 0
    for n, (scenario, own) in enumerate(zip(scenarios, alert_suite(cfg, scenarios), strict=True), 1):
        prefix = f"s{n:02d}-"
        mine = [s for s in stores if prefix + scenario.name in s["name"].split(" + ")]
        listed = {
            (c["eval_time"], c["alertname"]): sorted(
                _unprefixed(a, prefix) for a in c["exp_alerts"] if prefix in str(a)
            )
            for store in mine
            for c in store["alert_rule_test"]
        }
        quiet = {
            (c["eval_time"], c["expr"].split('alertname="')[1].split('"')[0])
            for store in mine
            for c in store.get("promql_expr_test", [])
            if f'execution_id=~"{prefix}.+"' in c["expr"]
            and f'hostname=~"{prefix}.+"' in c["expr"]
            and 'alertstate="firing"' in c["expr"]
            and c["exp_samples"] == []
        }
        for c in own["alert_rule_test"]:
            key = (c["eval_time"], c["alertname"])
            wanted = sorted(json.dumps(a, sort_keys=True) for a in c["exp_alerts"])
            if key in listed:
                assert listed[key] == wanted, (scenario.name, key)
            else:
                assert key in quiet and wanted == [], (scenario.name, key)
                quiet_checks += 1
        assert len(listed) + len(quiet) >= len(own["alert_rule_test"])
    assert quiet_checks  # the library has instants where some scenario is not robust for another's alert


@pytest.mark.e2e
def test_a_quiet_check_fails_where_its_scenario_fires_the_alert(tmp_path: Path):
    """The expression test that a scenario fires none of an alert selects that scenario's alerts: at an
    instant where it fires one, promtool fails it, naming the alert; beside another scenario that fires the
    same alert then, and where it fires none, it passes, unless an alert of the name names no execution or
    host (it could be this scenario's)."""
    cfg = Config()
    hot = library.apart([library.alert_suite()[0], library.alert_suite()[0]], cfg)  # the same scenario twice
    specs = alerting.specs(cfg)
    timelines = [Timelines(specs, World(s, cfg)) for s in hot]
    spec = next(s for s in specs if any(timelines[0].firing_at(s, k) for k in range(timelines[0].steps)))
    firing = next(k for k in range(timelines[0].steps) if timelines[0].firing_at(spec, k))
    rules = rule_files(cfg, tmp_path / "rules", command("test"))
    write_all(rules)
    order = [g.name for g in all_groups(cfg)]

    # The same alert fired by a rule that names neither an execution nor a host: whose it is cannot be told.
    nameless = tmp_path / "nameless.rules.yml"
    nameless.write_text(
        yaml.safe_dump(
            {"groups": [{"name": "nameless", "rules": [{"alert": PREFIX + spec.name, "expr": "vector(1)"}]}]}
        )
    )

    def failures(step: int, *extra: Path) -> str:
        test = store_test(cfg, timelines, listed=set(), quiet={(step, spec.name): [0]})
        doc = {
            "rule_files": [str(p) for p in (*rules, *extra)],
            "evaluation_interval": "15s",
            "group_eval_order": [*order, *(["nameless"] if extra else [])],
        }
        suite = tmp_path / f"quiet-{step}-{len(extra)}.test.yml"
        suite.write_text(yaml.safe_dump({**doc, "tests": [test]}))
        try:
            promtool.test_rules([suite])
        except promtool.PromtoolError as err:
            return str(err)
        return ""

    failure = failures(firing)
    assert f'alertname="{PREFIX}{spec.name}"' in failure and "s01-" in failure and "s02-" not in failure
    assert failures(0) == ""
    assert f'alertname="{PREFIX}{spec.name}", alertstate="firing"}} 1E+00' in failures(0, nameless)


def test_a_recording_store_holds_every_check_of_each_scenarios_own_test():
    """The recording suite holds every scenario in one store, under names of its own: each check of a
    scenario's own test is in it, reading only its names (the price list aside: one for the store)."""
    cfg, scenarios = Config(), library.default_suite()
    [store] = recording_suite(cfg, scenarios, together=True)
    checks = [c for c in store["promql_expr_test"] if c["expr"] != catalog.PRICE.name]
    found = set()
    for n, scenario in enumerate(scenarios, 1):
        prefix = f"s{n:02d}-"
        scope = (
            f'execution_id=~"{prefix}.+"',
            f'hostname=~"{prefix}.+"',
            f'UUID=~"GPU-{prefix}.+"',  # the GPU instances' shares, which name no execution or host
            f'execution_id="{prefix}',
            f'UUID="GPU-{prefix}',
        )
        own = [c for c in checks if prefix in c["expr"]]
        found.update(id(c) for c in own)
        assert all(any(s in c["expr"] for s in scope) for c in own), scenario.name
        stripped = sorted(_unprefixed({**c, "expr": _unscoped(c["expr"], prefix)}, prefix) for c in own)
        wanted = [c for c in scenario_test(scenario, cfg)["promql_expr_test"] if c["expr"] != catalog.PRICE.name]
        assert stripped == sorted(json.dumps(c, sort_keys=True) for c in wanted), scenario.name
    assert len(found) == len(checks)  # and no check of no scenario


@pytest.mark.e2e
def test_in_one_store_a_first_sample_counts_the_time_since_any_gpus_previous_sample(tmp_path: Path):
    """Without a cluster label, the first sample of an execution on an idle host of its own counts the
    time since the previous sample of any GPU in the store (``catalog.GPU_SAMPLE_SECONDS``): a step where
    another scenario's GPUs ran, where alone, with no ``rule_interval``, it would count nothing."""
    running = library.training_in("4.8")
    [solo] = library.missing_optional(frozenset(), "a late start").executions
    late = dataclasses.replace(
        library.missing_optional(frozenset(), "a late start"), executions=(dataclasses.replace(solo, start_minute=5),)
    )
    first_sample = catalog.GPU_SAMPLE_SECONDS.name + '{execution_id="'

    def firsts(tests: list[dict], execution: str) -> list[list[float]]:
        return [
            [s["value"] for s in c["exp_samples"]]
            for t in tests
            for c in t["promql_expr_test"]
            if c["expr"].startswith(first_sample + execution)
        ]

    assert firsts(recording_suite(Config(), [late]), "solo-0005") == [[]]
    store = recording_suite(Config(), [running, late], together=True)
    assert firsts(store, "s02-solo-0005") == [[15.0, 15.0]]
    assert suite_failures([testsuites.Variant("store", Config(), (running, late))], tmp_path, amd=False) == ""


def _run_default_suite(tmp_path: Path, execution: str) -> str:
    """Build the default variant's recording suite of the scenario holding ``execution`` (the one the
    mutation breaks) into tmp_path and return promtool's failure text."""
    out = suite_failures(testsuites.default_variants()[:1], tmp_path, only="default", executions=frozenset({execution}))
    assert out, "the suite passed on broken rules"
    return out


def _replace_gpu_series(monkeypatch: pytest.MonkeyPatch, series: catalog.Series, **changes) -> None:
    replaced = tuple(dataclasses.replace(s, **changes) if s is series else s for s in catalog.GPU_SERIES)
    monkeypatch.setattr(catalog, "GPU_SERIES", replaced)


@pytest.mark.single_version
@pytest.mark.e2e
def test_a_wrong_unit_conversion_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(catalog.UNITS, "MiB", Unit("MiB", "bytes", "*", 1_000_000))
    out = _run_default_suite(tmp_path, "gpuop3-job")  # a short scenario whose exporter publishes MiB
    assert f'expr: "{catalog.GPU_MEMORY_USED.name}"' in out


@pytest.mark.single_version
@pytest.mark.e2e
def test_reading_gpu_util_on_mig_instances_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Without GPU_I_ID="" the 0 that MIG instances report for GPU_UTIL wins over engine activity.
    _replace_gpu_series(
        monkeypatch,
        catalog.GPU_UTILIZATION,
        formulas=(Formula(signal("gpu_util")), Formula(signal("gr_engine_active"))),
    )
    out = _run_default_suite(tmp_path, "mig-0003")
    assert 'execution_id="mig-0003"' in out


KUBERNETES = config_from_mapping({"attribution": {"mode": "kubernetes"}}, "kubernetes")


def _virtual_gpu_suites() -> list[testsuites.Variant]:
    """The virtual-GPU pair (per-pod values beside the device's) in kubernetes mode: its series carry no execution
    id under label attribution (dcgm-exporter copies no pod label on its virtual-GPU path)."""
    return [testsuites.Variant("kubernetes", KUBERNETES, (library.virtual_gpus(),))]


@pytest.mark.single_version
@pytest.mark.e2e
def test_the_virtual_gpu_pair_sees_the_gpus_capacity_and_own_plus_free_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Both pods on the A10 have its 22 GiB as capacity; the execution's own use plus the GPU's free memory
    (the old expression) gives each a different, smaller one, and the suites say so."""
    pair = library.virtual_gpus()
    gpu = pair.executions[0].gpus[0]
    capacity = 22 * 1024**3  # the A10's usable framebuffer, as the scenario gives it
    assert gpu.mem_total_mib * 1024**2 == capacity
    for minute in (5.0, 15.0, 25.0):
        totals = expected.expected(pair, minute, KUBERNETES)[catalog.GPU_MEMORY_TOTAL.name]
        assert [s.value for s in totals] == [capacity, capacity]
    assert suite_failures(_virtual_gpu_suites(), tmp_path / "device", amd=False) == ""
    own_plus_free = Formula(signal("fb_used") + signal("fb_free"))
    _replace_gpu_series(
        monkeypatch,
        catalog.GPU_MEMORY_TOTAL,
        formulas=(own_plus_free, *catalog.GPU_MEMORY_TOTAL.formulas[1:]),
    )
    out = suite_failures(_virtual_gpu_suites(), tmp_path / "own", amd=False)
    assert f'expr: "{catalog.GPU_MEMORY_TOTAL.name}"' in out
    assert "vgpu-0035" in out and "vgpu-0036" in out
    assert f"{float(capacity):.10E}" in out  # promtool's spelling of the capacity it expected: 2.3622320128E+10


def _sum_power_per_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    """The execution's power summed over its GPU series, a device-wide power counted once per instance."""
    per_instance = Formula(aggregate("sum", catalog.EXECUTION_LABELS, catalog.GPU_POWER.select()))
    rollups = tuple(
        dataclasses.replace(s, formulas=(per_instance,)) if s is catalog.EXECUTION_GPU_POWER_SUM else s
        for s in catalog.EXECUTION_SERIES
    )
    monkeypatch.setattr(catalog, "EXECUTION_SERIES", rollups)


@pytest.mark.single_version
@pytest.mark.e2e
def test_counting_mig_power_per_instance_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _sum_power_per_instance(monkeypatch)
    out = _run_default_suite(tmp_path, "mig-0003")
    assert f'expr: "{catalog.EXECUTION_GPU_POWER_SUM.name}"' in out and "mig-0003" in out


def _attribute_power_as(monkeypatch: pytest.MonkeyPatch, *formulas: Formula) -> None:
    replaced = tuple(
        dataclasses.replace(s, formulas=formulas) if s is catalog.GPU_POWER_ATTRIBUTED else s
        for s in catalog.GPU_SHARE_SERIES
    )
    monkeypatch.setattr(catalog, "GPU_SHARE_SERIES", replaced)


@pytest.mark.single_version
@pytest.mark.e2e
def test_giving_a_gpu_instance_its_gpus_whole_power_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # dcgm-exporter repeats the GPU's power on each MIG instance: taken as it is, mig-0004's 3g instance would be
    # given all of an A100 whose 4g instance is free, and amd-oom's two CPX partitions all of an MI300X each.
    _attribute_power_as(monkeypatch, Formula(catalog.GPU_POWER.select() * catalog.GPU_WORK_SHARE.select()))
    out = _run_default_suite(tmp_path / "nvidia", "mig-0004")
    assert f'expr: "{catalog.GPU_POWER_ATTRIBUTED.name}"' in out and "mig-0004" in out
    out = suite_failures(testsuites.default_variants()[:1], tmp_path / "amd", only="default-amd")
    assert f'expr: "{catalog.GPU_POWER_ATTRIBUTED.name}{{execution_id=\\"amd-oom\\"}}"' in out, out


@pytest.mark.single_version
@pytest.mark.e2e
def test_sharing_a_gpus_power_equally_between_its_mig_instances_fails_the_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Every profile read as one slice: mig-0004's 3g instance would be given half the GPU's power, not 3/7.
    monkeypatch.setattr(catalog, "MIG_SLICES", ())
    out = _run_default_suite(tmp_path, "mig-0004")
    assert f'expr: "{catalog.GPU_POWER_ATTRIBUTED.name}"' in out and "mig-0004" in out


@pytest.mark.single_version
@pytest.mark.e2e
def test_billing_a_mig_instance_as_a_whole_gpu_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Each instance's share and work summed as they are, an instance-hour a GPU-hour: mig-0004's 3g instance
    # beside a free 4g would be billed a whole A100, not 3/7 of one, and its work counted so too; amd-oom's two
    # CPX partitions of an MI300X two MI300Xs, not a quarter of one.
    as_whole_gpus = tuple(
        dataclasses.replace(s, formulas=(Formula(aggregate("sum", catalog.MODEL_LABELS, per_gpu.select())),))
        for s, per_gpu in zip(catalog.COST_SERIES, (catalog.GPU_SHARE, catalog.GPU_WORKED), strict=True)
    )
    monkeypatch.setattr(catalog, "COST_SERIES", as_whole_gpus)
    out = _run_default_suite(tmp_path / "nvidia", "mig-0004")
    for series in catalog.COST_SERIES:
        assert series.name in out and "mig-0004" in out, series.name
    out = suite_failures(testsuites.default_variants()[:1], tmp_path / "amd", only="default-amd")
    assert catalog.MODEL_GPU_COUNT.name in out and "amd-oom" in out, out


@pytest.mark.single_version
@pytest.mark.e2e
def test_counting_an_amd_gpus_power_per_partition_fails_the_amd_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # An MI300X in CPX mode gives its device power to each partition: summed per partition, amd-oom's two
    # partitions would count the one GPU twice.
    _sum_power_per_instance(monkeypatch)
    out = suite_failures(testsuites.default_variants()[:1], tmp_path, only="default-amd")
    assert f'expr: "{catalog.EXECUTION_GPU_POWER_SUM.name}{{execution_id=\\"amd-oom\\"}}"' in out, out


@pytest.mark.single_version
@pytest.mark.e2e
def test_a_users_config_is_tested_on_the_amd_fleet(tmp_path: Path):
    """Its own execution label, the Helm chart's prefix alone, Slurm's job id under another name and its own job."""
    amd = {"metric_prefixes": ["amd_"], "execution_label": "slurm_job", "selector": 'job="rocm"'}
    cfg = config_from_mapping({"execution_label": "run_id", "amd": amd}, "test")
    variants = testsuites.config_variants(cfg)
    files = testsuites.suite_files(variants, tmp_path, only="config-amd")
    assert [p.name for p in testsuites.suite_test_paths(files)] == ["config-amd.test.yml"]
    text = files[tmp_path / "config-amd.test.yml"]
    assert 'slurm_job="amd-oom"' in text and "series: amd_gpu_used_vram{" in text
    assert "series: gpu_used_vram{" not in text  # every exporter under the one prefix configured
    assert 'job="rocm"' in text and 'job="exporter-amdgpu-metrics-exporter"' not in text
    assert suite_failures(variants, tmp_path, only="config-amd") == ""


def test_missing_promtool_says_how_to_install_it():
    code = "from gpu_execution_pack import promtool; promtool.find()"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env_without_promtool(), cwd=REPO, check=False
    )
    assert proc.returncode != 0
    assert "apt-get install prometheus" in proc.stderr


def test_promtool_failures_are_reported_with_promtools_findings(tmp_path: Path):
    broken = tmp_path / "broken.rules.yml"
    broken.write_text("groups:\n- name: x\n  rules:\n  - record: bad name\n    expr: up\n")
    with pytest.raises(promtool.PromtoolError) as err:
        promtool.check_rules([broken])
    assert "promtool check rules failed" in str(err.value)
    assert "bad name" in str(err.value)


def _up_suite(path: Path, expected: int, padding: int = 0) -> Path:
    """A suite file at ``path`` of one rule (``job:up:sum``, written beside it) and one check that its value is
    ``expected`` (1 passes), with ``padding`` hundred bytes of comment after it."""
    rules = path.parent / "up.rules.yml"
    rules.write_text("groups:\n- name: x\n  rules:\n  - record: job:up:sum\n    expr: sum by (job) (up)\n")
    test = {
        "interval": "1m",
        "input_series": [{"series": 'up{job="a",instance="h:1"}', "values": "1x5"}],
        "promql_expr_test": [
            {
                "expr": "job:up:sum",
                "eval_time": "2m",
                "exp_samples": [{"labels": 'job:up:sum{job="a"}', "value": expected}],
            }
        ],
    }
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "tests": [test]}) + "#" * 100 * padding)
    return path


def test_each_suite_file_runs_on_its_own_and_only_failed_files_are_named(tmp_path: Path):
    """test_rules runs every file (one promtool each) and names the failed ones, with promtool's findings."""
    passing = [_up_suite(tmp_path / f"pass{i}.test.yml", 1) for i in range(3)]
    assert promtool.test_rules(passing).ok
    wrong = _up_suite(tmp_path / "wrong.test.yml", 2)
    with pytest.raises(promtool.PromtoolError) as err:
        promtool.test_rules([*passing, wrong])
    message = str(err.value)
    assert "failed for 1 of 4 files" in message
    assert str(wrong) in message and "job:up:sum" in message
    assert not any(str(p) in message for p in passing)


def test_a_recording_suite_leaves_the_alert_rules_to_its_variants_alert_suite(tmp_path: Path):
    """promtool evaluates every group loaded at every step: a recording suite loads the alerts only where no alert
    suite of its config evaluates them (with every other rule file), so that every config's alerts still run."""
    default, mapping = (v for v in testsuites.default_variants() if v.name in ("default", "mapping"))
    assert default.alerts and not mapping.alerts
    files = testsuites.suite_files([default, mapping], tmp_path, executions=frozenset({"mig-0003", "hot-0014"}))
    docs = {p.name: yaml.safe_load(files[p]) for p in testsuites.suite_test_paths(files)}
    assert set(docs) == {"default.test.yml", "default-alerts.test.yml", "default-amd.test.yml", "mapping.test.yml"}
    alerts = [g.name for g in all_groups(default.config) if any(isinstance(r, AlertRule) for r in g.rules)]
    assert alerts == ["gpu-execution-pack.alerts"]
    loaded = {name: {Path(f).name for f in doc["rule_files"]} for name, doc in docs.items()}
    assert "alerts.rules.yml" not in loaded["default.test.yml"]
    assert alerts[0] not in docs["default.test.yml"]["group_eval_order"]
    every = {p.name for p in files if p.parent == tmp_path / "default" and p.name.endswith(".rules.yml")}
    assert loaded["default.test.yml"] == every - {"alerts.rules.yml"}
    # The AMD fleet is in no alert suite: its suite keeps them.
    for name in ("default-alerts.test.yml", "default-amd.test.yml", "mapping.test.yml"):
        assert "alerts.rules.yml" in loaded[name] and alerts[0] in docs[name]["group_eval_order"]
    # The kubernetes variant's alert suite holds one scenario of the alert library: its recording suite keeps them.
    [kubernetes] = (v for v in testsuites.default_variants() if v.name == "kubernetes")
    assert kubernetes.alerts and [s.name for s in kubernetes.alert_library()] == [library.virtual_gpus_full().name]
    files = testsuites.suite_files([kubernetes], tmp_path / "k", executions=frozenset({"vgpufull-0037"}))
    docs = {p.name: yaml.safe_load(files[p]) for p in testsuites.suite_test_paths(files)}
    assert set(docs) == {"kubernetes.test.yml", "kubernetes-alerts.test.yml", "kubernetes-amd.test.yml"}
    for doc in docs.values():
        assert "alerts.rules.yml" in {Path(f).name for f in doc["rule_files"]}


def test_promtool_collects_its_garbage_less_often_unless_the_environment_says_how_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """promtool runs with a garbage collector target above Go's default (100), a fifth of a large suite's CPU
    saved; a GOGC the user set is theirs."""
    recorder = tmp_path / "promtool"  # prints the GOGC it was started with
    recorder.write_text('#!/bin/sh\necho "GOGC=$GOGC"\n')
    recorder.chmod(0o755)
    monkeypatch.setenv("PROMTOOL", str(recorder))
    monkeypatch.delenv("GOGC", raising=False)
    assert int(promtool.run(["--version"]).output.strip().removeprefix("GOGC=")) > 100
    monkeypatch.setenv("GOGC", "50")
    assert promtool.run(["--version"]).output.strip() == "GOGC=50"


def test_the_largest_suite_files_start_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One promtool at a time: the files start largest first, so a big suite never runs on alone at the end
    of a run while the other cores idle; the findings keep the order the files were given in."""
    real = promtool.find()
    started = tmp_path / "started"
    recorder = tmp_path / "promtool"  # the real promtool, run after writing down which file it tests
    recorder.write_text(f'#!/bin/sh\necho "$3" >> {started}\nexec {real} "$@"\n')
    recorder.chmod(0o755)
    monkeypatch.setenv("PROMTOOL", str(recorder))
    # Each fails (a wrong value), so each one's findings are in the error.
    files = [
        _up_suite(tmp_path / f"{name}.test.yml", 2, padding)
        for name, padding in (("small", 0), ("large", 40), ("medium", 20))
    ]
    with pytest.raises(promtool.PromtoolError) as err:
        promtool.test_rules(files, jobs=1)
    assert started.read_text().split() == [str(tmp_path / f"{n}.test.yml") for n in ("large", "medium", "small")]
    message = str(err.value)
    assert "failed for 3 of 3 files" in message
    assert message.index("small.test.yml") < message.index("large.test.yml") < message.index("medium.test.yml")
