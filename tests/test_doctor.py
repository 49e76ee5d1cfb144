"""``doctor`` against real Prometheus servers loaded with the scenario library: one deployment that
matches its config (nothing fails) and one that diverges from it in every way the checklist names
(several clusters without ``cluster_label``, a host name two machines claim, a scrape too slow for the
rate windows, rule groups not loaded, rule files of another pack version, groups missing iterations, a
cluster whose GPU-time no execution holds), each found with its fix; and ``--write-config`` writing the
config the first deployment should have."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import __version__
from gpu_execution_pack.build import rule_outputs
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.doctor import probe
from gpu_execution_pack.output import write_all
from gpu_execution_pack.promql import Range, call, render, selector
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.model import Execution, Host, Scenario
from gpu_execution_pack.scenario.phases import TRAINING
from gpu_execution_pack.scenario.render import RenderedSeries, Renderer

from harness.prometheus import Prometheus, free_port
from harness.upstreams import Proxy, Seen

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

REPO = Path(__file__).resolve().parent.parent
# The first deployment's config: one dcgm-exporter generation, NVIDIA only, as its fleet is.
MATCHING = {"vendors": ["nvidia"], "dcgm": {"generations": ["4.8"]}}
CLUSTERED = {"vendors": ["nvidia"], "dcgm": {"generations": ["4.8"]}, "cluster_label": "cluster"}


def serve(
    workdir: Path,
    cfg_data: dict,
    scenarios: list,
    scrape: str,
    rules: str = "*",
    evaluation: str = "15s",
    version: str = "",
    render_as: dict[str, dict] | None = None,
    relabel: Callable[[RenderedSeries], RenderedSeries] = lambda series: series,
) -> Prometheus:
    """A Prometheus holding ``scenarios`` up to a minute ago (so their GPUs report now), scraping itself every
    ``scrape`` with the target label hostname, with ``cfg_data``'s rule files matching the glob ``rules`` loaded
    (none where empty) and evaluated every ``evaluation`` where their group sets no interval, their version
    label rewritten to ``version`` where given; a scenario of a cluster named in ``render_as`` is published as
    that config (its attribution, say) has it, not as ``cfg_data``'s rules read it; every series as ``relabel``
    stores it (another scrape config's target labels)."""
    cfg = config_from_mapping({**cfg_data, "output": {"rules_dir": str(workdir / "rules")}})
    end = int(time.time()) - 60
    start = end - max(s.window_minutes for s in scenarios) * 60
    published = {c: config_from_mapping({**cfg_data, **extra}) for c, extra in (render_as or {}).items()}
    series = [
        relabel(s)
        for scenario in scenarios
        for s in Renderer(scenario, published.get(scenario.cluster, cfg)).all_series()
    ]
    server = Prometheus(workdir, port=free_port())
    server.load(series, all_groups(cfg), start, end)
    files = {p: text for p, text in rule_outputs(cfg).items() if p.name.endswith(".rules.yml")}
    if version:  # the files as an older pack wrote them: its version in the header and on the rules_info rule
        files = {p: text.replace(f"version: {__version__}", f"version: {version}") for p, text in files.items()}
    write_all(files)
    server.config_text = (
        f"global: {{scrape_interval: {scrape}, evaluation_interval: {evaluation}}}\n"
        + (f"rule_files: ['{workdir / 'rules'}/{rules}.rules.yml']\n" if rules else "")
        # The one live target stands in for the GPU exporters: its job is theirs (the backfilled series'), so the
        # scrape-interval check, which judges the jobs the rules read, judges it.
        + "scrape_configs:\n- job_name: dcgm-exporter\n  static_configs:\n"
        + f"  - targets: ['127.0.0.1:{server.port}']\n    labels: {{hostname: prometheus-host}}\n"
    )
    server.reload()
    reloaded(server, bool(rules))
    return server


def reloaded(server: Prometheus, rules: bool, seconds: float = 30) -> None:
    """Wait until the server scrapes its target (and has loaded and evaluated the rule files), as a reload is
    asynchronous."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        targets = server._data("targets", {"state": "active"}, 10)["activeTargets"]
        groups = server._data("rules", {}, 10)["groups"]
        # a group evaluated (lastEvaluation is the zero time before): its iteration counters have counted
        if targets and (not rules or any(not g["lastEvaluation"].startswith("0001") for g in groups)):
            return
        time.sleep(0.5)
    raise AssertionError("the reloaded configuration did not take effect")


def doctor(server: Prometheus, cfg_data: dict | None, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "gpu_execution_pack", "doctor", "--prometheus", server.url, *extra]
    if cfg_data is not None:
        config = tmp_path / "pack.yml"
        config.write_text(yaml.safe_dump(cfg_data))
        args += ["--config", str(config)]
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)


def checks_of(run: subprocess.CompletedProcess) -> dict[str, dict]:
    return {c["check"]: c for c in json.loads(run.stdout)["checks"]}


@pytest.fixture(scope="module")
def matching(tmp_path_factory: pytest.TempPathFactory):
    server = serve(tmp_path_factory.mktemp("matching"), MATCHING, [library.training_in("4.8")], "15s")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def divergent(tmp_path_factory: pytest.TempPathFactory):
    scenarios = [*library.two_clusters(), *library.name_collision_installs()[:1]]
    # The per-GPU file only, written by an older pack and evaluated every 2 ms (its groups take longer: missed
    # iterations); us-1's exporters publish the execution id as a mapping metric the rules do not read.
    server = serve(
        tmp_path_factory.mktemp("divergent"),
        CLUSTERED,
        scenarios,
        "5m",
        rules="execution-gpu",
        evaluation="2ms",
        version="0.1.0",
        render_as={"us-1": {"attribution": {"mode": "mapping"}}},
    )
    try:
        yield server
    finally:
        server.stop()


def test_a_deployment_that_matches_its_config_passes(matching, tmp_path: Path):
    run = doctor(matching, MATCHING, tmp_path, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    checks = checks_of(run)
    assert {c["status"] for c in checks.values()} <= {"pass", "info"}, checks
    for name in (
        "vendors",
        "dcgm generations",
        "rule groups",
        "rules version",
        "missed iterations",
        "attribution",
        "attributed GPU-time",
        "clusters",
        "scrape intervals",
    ):
        assert checks[name]["status"] == "pass", checks[name]
    assert checks["attribution"]["found"].startswith("4 of ")  # the training job's four GPUs
    # No kube-state-metrics capacity series in this deployment: whether GPUs are shared cannot be told.
    assert checks["shared GPUs"]["status"] == "info", checks["shared GPUs"]
    assert f"from gpu-execution-pack {__version__}" in checks["rules version"]["found"]


def no_metrics_page(seen: Seen, status: int, body: bytes) -> tuple[int, bytes]:
    """A query frontend's answers (Thanos Query, Mimir): the API, and no /metrics of the server behind it."""
    return (404, b"404 page not found") if seen.path.endswith("/metrics") else (status, body)


def test_without_the_servers_metrics_page_the_missed_iterations_are_read_from_its_stored_counters(
    matching, tmp_path: Path
):
    # The server scrapes itself every 15s; increase() needs two samples of each counter.
    samples = render(call("count_over_time", Range(selector(probe.ITERATIONS), "5m")))
    deadline = time.monotonic() + 60
    while min((float(r["value"][1]) for r in matching.query(samples, time.time())), default=0) < 2:
        assert time.monotonic() < deadline, "the server stored no two samples of its own iteration counters"
        time.sleep(2)
    with Proxy(matching.url, no_metrics_page) as frontend:
        run = subprocess.run(
            [sys.executable, "-m", "gpu_execution_pack", "doctor", "--prometheus", frontend.url, "--json"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        asked = {seen.path for seen in frontend.seen}
    assert "/metrics" in asked  # tried first, and answered 404
    item = checks_of(run)["missed iterations"]
    assert item["status"] == "pass" and item["found"].startswith("no missed iteration in "), item


def nan_iterations(seen: Seen, status: int, body: bytes) -> tuple[int, bytes]:
    """The server's /metrics with every rule group's iteration counters reading NaN, as a broken exporter or
    compatible server may give them; the API as the server answers it."""
    if not seen.path.endswith("/metrics"):
        return status, body
    counters = "|".join(re.escape(m) for m in (probe.ITERATIONS_MISSED, probe.ITERATIONS))
    return status, re.sub(rf"^((?:{counters})\{{[^}}]*\}}) \S+$", r"\1 NaN", body.decode(), flags=re.M).encode()


def test_iteration_counters_read_as_nan_are_said_unknown_not_nan_of_nan(matching, tmp_path: Path):
    with Proxy(matching.url, nan_iterations) as server:
        run = subprocess.run(
            [sys.executable, "-m", "gpu_execution_pack", "doctor", "--prometheus", server.url],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
    assert "Traceback" not in run.stderr, run.stderr
    (line,) = [x for x in run.stdout.splitlines() if "missed iterations" in x]
    assert "nan" not in line.replace("NaN", ""), line
    assert "missed iterations unknown (Prometheus returned NaN) for gpu-execution-pack." in line, line
    assert line.split()[0] == "INFO", line


def scraped_every_1000y(seen: Seen, status: int, body: bytes) -> tuple[int, bytes]:
    """The server's targets as a compatible API may list them: every one scraped every 1000y."""
    if not seen.path.endswith("/api/v1/targets"):
        return status, body
    return status, re.sub(rb'"scrapeInterval":"[^"]*"', b'"scrapeInterval":"1000y"', body)


def test_write_config_leaves_out_a_value_the_config_refuses_and_writes_one_it_loads(matching, tmp_path: Path):
    """A scrape every 1000y called for rate_window_fallback: 4000y (past 292y): the config doctor wrote, its own
    validation then refused. The key is left out and the file says why; `doctor -c` on it runs."""
    written = tmp_path / "suggested.yml"
    with Proxy(matching.url, scraped_every_1000y) as server:
        wrote = doctor(server, MATCHING, tmp_path, "--write-config", str(written))
        assert "Traceback" not in wrote.stderr and f"wrote {written}" in wrote.stderr, wrote.stderr
        text = written.read_text()
        assert "rate_window_fallback" not in yaml.safe_load(text)
        assert "#   rate_window_fallback: not written, the config would refuse '4000y'" in text, text
        again = doctor(server, None, tmp_path, "-c", str(written))
    assert not again.stderr.startswith("error:") and "FAIL  scrape intervals" in again.stdout, again.stderr


def test_the_defaults_against_a_one_generation_nvidia_fleet_say_what_to_pin(matching, tmp_path: Path):
    run = doctor(matching, None, tmp_path, "--json")
    checks = checks_of(run)
    assert checks["vendors"]["status"] == "warn" and checks["vendors"]["fix"].startswith("set vendors: [nvidia] ")
    assert checks["dcgm generations"]["status"] == "warn"
    assert checks["dcgm generations"]["fix"].startswith("set dcgm.generations: ['4.8']")
    # The defaults read AMD too: their amd group is not among the loaded ones.
    assert checks["rule groups"]["status"] == "fail" and "gpu-execution-pack.amd" in checks["rule groups"]["found"]
    assert run.returncode == 1


def test_a_config_pinned_to_another_generation_fails_with_the_fix(matching, tmp_path: Path):
    checks = checks_of(doctor(matching, {"dcgm": {"generations": ["4.9", "4.10"]}}, tmp_path, "--json"))
    assert checks["dcgm generations"]["status"] == "fail"
    assert checks["dcgm generations"]["fix"] == "set dcgm.generations: ['4.8']"


def test_rules_deployed_from_another_config_are_named_though_the_config_matches_the_fleet(matching, tmp_path: Path):
    """The loaded rules are MATCHING's. A config that matches the fleet as well, but whose rules differ (longer
    rate windows in the per-GPU file, another memory threshold in the alerts), is not what is deployed:
    the rules version check names the files and what to do, though every file is of this pack's version."""
    other = {**MATCHING, "rate_window_fallback": "2m", "alerts": {"gpu_memory_high": {"threshold": 0.8}}}
    checks = checks_of(doctor(matching, other, tmp_path, "--json"))
    assert checks["dcgm generations"]["status"] == "pass"  # the config matches the fleet
    version = checks["rules version"]
    assert version["status"] == "warn", version
    configured = re.search(r"rule files generated from another config: ([^;]+)", version["found"])
    assert configured, version
    # The rate windows are read in the per-GPU file alone (the host CPU rate's group is in it too).
    assert [Path(f).name for f in configured.group(1).split(", ")] == ["execution-gpu.rules.yml"], version
    assert "alerts.rules.yml holds GpuExecutionGpuMemoryHigh as another config writes them" in version["found"]
    assert version["fix"].endswith("or point -c at the config they came from"), version


def test_every_divergence_is_named_with_its_fix(divergent, tmp_path: Path):
    unclustered = {key: value for key, value in CLUSTERED.items() if key != "cluster_label"}
    run = doctor(divergent, unclustered, tmp_path)
    assert run.returncode == 1
    text = run.stdout
    assert "FAIL  clusters" in text and "-> set cluster_label: cluster" in text
    assert "FAIL  scrape intervals" in text and "every 5m" in text and "rate_window_fallback" in text
    assert "FAIL  rule groups" in text and "not loaded: gpu-execution-pack.execution_node" in text
    assert "WARN  rules version" in text and "execution-gpu.rules.yml (0.1.0)" in text
    assert f"-> generate the rules with this pack ({__version__})" in text
    missed = next(line for line in text.splitlines() if "FAIL  missed iterations" in line)
    assert re.search(r"gpu-execution-pack\.\w+ \d+ of \d+ \(evaluation \d+ % of its interval\)", missed), missed
    assert "WARN  host names" in text and "gpu-01" in text


def test_with_the_cluster_label_set_the_clusters_pass(divergent, tmp_path: Path):
    checks = checks_of(doctor(divergent, CLUSTERED, tmp_path, "--json"))
    assert checks["clusters"]["status"] == "pass" and "eu-1" in checks["clusters"]["found"]
    # us-1's GPUs reported all day and none carried an execution id the rules read; eu-1's did.
    coverage = checks["attributed GPU-time"]
    assert coverage["status"] == "warn" and "us-1 0 %" in coverage["found"], coverage
    assert re.search(r"eu-1 [1-9]\d* %", coverage["found"]) and coverage["fix"].startswith("in us-1: "), coverage


def test_write_config_pins_what_the_fleet_has_and_keeps_the_users_keys(matching, tmp_path: Path):
    written = tmp_path / "suggested.yml"
    own = {"alerts": {"gpu_memory_high": {"threshold": 0.8}}}
    doctor(matching, own, tmp_path, "--write-config", str(written))
    text = written.read_text()
    data = yaml.safe_load(text)
    assert data["vendors"] == ["nvidia"] and data["dcgm"]["generations"] == ["4.8"]
    # The self-scrape target carries hostname, but the exporters' backfilled series do not: not named at scrape.
    assert "host_identity" not in data.get("node", {})
    assert data["alerts"]["gpu_memory_high"]["threshold"] == 0.8
    assert "misses" in text or "goes unrecorded" in text  # the warning a pinned config needs
    cfg = config_from_mapping(data)
    assert [g.name for g in all_groups(cfg)] == [g.name for g in all_groups(config_from_mapping(MATCHING))]


def test_hosts_named_at_scrape_in_the_config_but_not_in_the_series_fail_with_the_fix(matching, tmp_path: Path):
    """The config says the scrape config names each target's host; the fleet's exporters were scraped without the
    target label hostname (node_exporter publishes none of its own): recorded with an empty host, named here."""
    run = doctor(matching, {**MATCHING, "node": {"host_identity": "scrape"}}, tmp_path, "--json")
    assert run.returncode == 1, run.stdout + run.stderr
    check = checks_of(run)["host identity"]
    assert check["status"] == "fail" and "carry no hostname" in check["found"], check
    assert re.search(r"\(([\w.-]+:9100)(, [\w.-]+:9\d00)*\)", check["found"]), check  # node_exporter's targets named
    assert "node.host_identity: join" in check["fix"], check
    assert checks_of(doctor(matching, MATCHING, tmp_path, "--json"))["host identity"]["status"] == "pass"


def per_gpu_job_files() -> Scenario:
    """Two Slurm jobs on the two 3g instances of one A100, behind a dcgm-exporter whose HPC job mapping reads one file
    per GPU index (as before it read <gpu>.<GPU_I_ID> files): the prolog wrote both jobs to file 0, and the exporter
    gave both instances both jobs' hpc_job (its hpcMapper looked up gpuToJobMap[metric.GPU])."""
    mig = library.mig()
    both = tuple(g for g in mig.executions[0].gpus)  # GPU 0's two instances
    jobs = tuple(Execution(job, both, TRAINING, namespace="") for job in ("slurm-4101", "slurm-4102"))
    return replace(mig, name="per-GPU job files", hosts=(Host("m1", "4.8"),), executions=jobs)


# prometheus-community/prometheus's values.yaml: its job for annotated services (honor_labels: true, target labels
# namespace, service and node), which scrapes dcgm-exporter, node_exporter and kube-state-metrics alike.
ANNOTATION_JOB = "kubernetes-service-endpoints"


def by_annotation(series: RenderedSeries) -> RenderedSeries:
    """s05's dcgm-exporter series as that job stores them (the others as rendered)."""
    labels = dict(series.labels)
    if labels.get("job") != "dcgm-exporter" or not labels.get("instance", "").startswith("s05-"):
        return series
    return replace(series, labels=tuple(sorted((labels | {"job": ANNOTATION_JOB, "service": "dcgm-exporter"}).items())))


CLAIMED = "claimed"  # the cluster value (no label: no cluster_label) the claimed GPUs' scenarios are rendered under


def claimed() -> list:
    """The library's virtual-GPU pair and its DRA install: pods holding GPUs through the paths on which
    dcgm-exporter copies no pod label."""
    return [replace(s, cluster=CLAIMED) for s in (library.virtual_gpus(), library.real_install("dra1"))]


def held_to_the_end(scenarios: list) -> list:
    """``scenarios`` with each execution computing for the MIG scenario's whole window, so that its GPUs are held
    now (the fleet's scenarios end together)."""
    minutes = library.mig().window_minutes
    phases = ("compute",) * (minutes // 10 + 1)  # ten minutes each, one past the window's end
    return [
        replace(s, minutes=minutes, executions=tuple(replace(e, phases=phases, start_minute=0) for e in s.executions))
        for s in scenarios
    ]


@pytest.fixture(scope="module")
def mig_fleet(tmp_path_factory: pytest.TempPathFactory):
    """Two MIG hosts (the library's MIG scenario twice, under names of their own): s01's dcgm-exporter publishes
    engine activity, s02's does not (3.x's default counters, or the profiling module not loaded). Beside them, s03's
    whole GPUs behind a dcgm-exporter run with --use-old-namespace (pod_namespace, not namespace), s04's MIG
    instances behind a Slurm job mapping of one file per GPU, and s05's upstream Helm chart install scraped by the
    prometheus-community chart's annotation job (``kubernetes_service_endpoints``), not one named after dcgm; s06's
    virtual-GPU pair (KUBERNETES_VIRTUAL_GPUS) and s07's DRA claim, as dcgm-exporter publishes them: without the pods'
    own labels, so with no execution id under label attribution (its transformation/kubernetes.go copies them on the
    device-plugin path only)."""
    from gpu_execution_pack.config import Config

    without_activity = replace(library.mig(), missing=frozenset({"gr_engine_active"}))
    training = library.training_in("4.8")
    old_labels = replace(training, hosts=tuple(replace(h, old_pod_labels=True) for h in training.hosts))
    helm = replace(library.real_install("helm1"), minutes=library.mig().window_minutes)  # reporting to the end
    scenarios = library.apart(
        [library.mig(), without_activity, old_labels, per_gpu_job_files(), helm, *held_to_the_end(claimed())], Config()
    )
    # The claimed GPUs' series as dcgm-exporter publishes them: pod, namespace and container but none of the pod's
    # own labels, as the scenario library renders them for kubernetes attribution (whose kube_pod_labels no check
    # here reads).
    render_as = {CLAIMED: {"attribution": {"mode": "kubernetes"}}}
    server = serve(
        tmp_path_factory.mktemp("mig"),
        {"vendors": ["nvidia"]},
        scenarios,
        "15s",
        rules="",
        relabel=by_annotation,
        render_as=render_as,
    )
    try:
        yield server
    finally:
        server.stop()


def test_mig_instances_without_engine_activity_are_named_with_the_fields_fix(mig_fleet, tmp_path: Path):
    """A MIG instance has no GPU_UTIL: without engine activity its executions hold no GPU in the recorded series
    (no GPU-hours, no report), which no other check said: the GPUs report and the others are attributed."""
    item = checks_of(doctor(mig_fleet, {"vendors": ["nvidia"]}, tmp_path, "--json"))["MIG utilisation"]
    assert item["status"] == "warn", item
    # Each MIG scenario has four instances (two A100s of two instances each), s04 three (the jobs' two, and the
    # second A100's free 4g instance); s02's four report no activity.
    assert item["found"].startswith("4 of 11 MIG instances report without engine activity"), item
    assert "s02-m1:9400" in item["found"] and "s01-m1" not in item["found"], item
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in item["fix"] and "dcp-metrics-included.csv" in item["fix"], item


def test_dcgm_exporters_old_pod_labels_are_named_with_the_fix(mig_fleet, tmp_path: Path):
    """dcgm-exporter under --use-old-namespace spells the workload's namespace pod_namespace: the rules read
    namespace, so s03's executions have no tenant, and nothing else says why. The other hosts' labels are as read."""
    item = checks_of(doctor(mig_fleet, {"vendors": ["nvidia"]}, tmp_path, "--json"))["pod labels"]
    assert item["status"] == "warn", item
    assert item["found"].startswith("the GPU series of 2 targets (s03-h1:9400, s03-h2:9400) carry uuid, pod_name"), item
    assert "pod_namespace" in item["found"] and "have no tenant (namespace)" in item["found"], item
    assert "have no UUID, so every GPU of a host reads as one device" in item["found"], item
    assert "--use-old-namespace" in item["fix"] and "pod_namespace to namespace" in item["fix"], item
    assert "uuid to UUID" in item["fix"], item


def test_mig_instances_that_each_carry_every_job_of_their_gpu_are_named_with_the_fix(mig_fleet, tmp_path: Path):
    """A job mapping file per GPU index gives every MIG instance of the GPU every job in it: each job then holds (and
    is billed a share of) both instances, which reads as time-slicing. The other hosts' instances carry one job."""
    item = checks_of(doctor(mig_fleet, {"vendors": ["nvidia"]}, tmp_path, "--json"))["MIG job mapping"]
    assert item["status"] == "warn", item
    assert item["found"].startswith("2 MIG instances carry several execution_id ids at once without vgpu"), item
    assert "(targets s04-m1:9400)" in item["found"], item
    assert "<gpu>.<GPU_I_ID>" in item["fix"], item


def test_a_dcgm_exporter_job_the_exporter_down_alert_does_not_watch_is_named_with_the_fix(mig_fleet, tmp_path: Path):
    """selectors.dcgm_targets' default (job=~".*dcgm.*") selects no target of the prometheus-community chart's
    annotation job: s05's dcgm-exporter could go down without GpuExecutionDcgmExporterDown firing. The others' job
    is watched; a selector for the job passes."""
    checks = checks_of(doctor(mig_fleet, {"vendors": ["nvidia"]}, tmp_path, "--json"))
    item = checks["exporter targets"]
    assert item["status"] == "warn", item
    assert item["found"].startswith(f"no up series of job {ANNOTATION_JOB}, which publishes dcgm-exporter's"), item
    assert "GpuExecutionDcgmExporterDown cannot fire" in item["found"] and "dcgm-exporter," not in item["found"], item
    assert item["fix"].startswith(f'set selectors.dcgm_targets to select them, e.g. job="{ANNOTATION_JOB}"'), item
    watched = {"vendors": ["nvidia"], "selectors": {"dcgm_targets": f'job=~"dcgm-exporter|{ANNOTATION_JOB}"'}}
    item = checks_of(doctor(mig_fleet, watched, tmp_path, "--json"))["exporter targets"]
    assert item["status"] == "pass", item


def test_gpus_held_through_a_dra_claim_or_as_virtual_gpus_without_an_execution_id_are_named_with_the_fix(
    mig_fleet, tmp_path: Path
):
    """dcgm-exporter copies a pod's own labels (the execution id label attribution reads) onto a GPU held through
    the device plugin only: s06's virtual GPUs (vgpu) and s07's DRA claim (dra_claim_name) carry pod, namespace and
    container but no execution_id, so their executions hold no GPU. The other hosts' series are not named; under
    kubernetes attribution (kube_pod_labels joined on namespace and pod) the check does not apply."""
    item = checks_of(doctor(mig_fleet, {"vendors": ["nvidia"]}, tmp_path, "--json"))["claimed GPUs"]
    assert item["status"] == "warn", item
    assert item["found"].startswith("the GPU series of 2 targets (s06-h24:9400, s07-dra1:9400) carry"), item
    assert "dra_claim_name or vgpu" in item["found"] and "no execution_id" in item["found"], item
    assert item["fix"].startswith("set attribution.mode: kubernetes"), item
    kubernetes = {"vendors": ["nvidia"], "attribution": {"mode": "kubernetes"}}
    assert checks_of(doctor(mig_fleet, kubernetes, tmp_path, "--json"))["claimed GPUs"]["status"] == "info"
