"""Config loading: defaults, overrides, and a clear error for every kind of bad input."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from gpu_execution_pack import build
from gpu_execution_pack.config import Config, ConfigError, config_from_mapping, load_config, read_yaml
from gpu_execution_pack.docs import configuration as config_docs
from gpu_execution_pack.promql import match
from gpu_execution_pack.rules.recording import recording_groups

from .conftest import REPO


def test_no_file_gives_the_defaults():
    cfg = load_config(None)
    assert cfg == Config()
    assert cfg.execution_label == "execution_id"
    assert cfg.attribution.mode == "label"
    assert cfg.selectors.dcgm == "" and cfg.selectors.node == ""
    assert cfg.alerts.gpu_underutilized.threshold == 0.15
    assert cfg.alerts.gpu_underutilized.for_ == "30m"


def test_overrides_apply_and_keep_other_defaults(tmp_path: Path):
    path = tmp_path / "pack.yml"
    path.write_text(
        "execution_label: hpc_job\n"
        'selectors: {dcgm: \'job="dcgm", cluster=~"eu-.*"\'}\n'
        "dcgm: {generations: ['4.10', '4.8']}\n"
        "alerts: {gpu_memory_high: {threshold: 0.9, for: 1m}}\n"
    )
    cfg = load_config(path)
    assert cfg.execution_label == "hpc_job"
    assert cfg.selectors.dcgm == 'job="dcgm", cluster=~"eu-.*"'
    assert cfg.selectors.dcgm_matchers == (match("job", "dcgm"), match("cluster", "eu-.*", "=~"))
    assert cfg.selectors.node == "" and cfg.selectors.node_matchers == ()
    assert cfg.dcgm.generations == ("4.8", "4.10")  # catalog order, whatever the file's order
    assert cfg.alerts.gpu_memory_high.threshold == 0.9
    assert cfg.alerts.gpu_memory_high.for_ == "1m"
    assert cfg.alerts.gpu_memory_high.severity == "warning"


BAD = [
    (
        {"colour": "red"},
        "colour: unknown key; accepted keys: alertmanager, alerts, amd, api, archive, attribution, cluster_",
    ),
    ({"vendor": ["amd"]}, "vendor: unknown key; did you mean 'vendors'? accepted keys: alertmanager, alerts, amd"),
    # A key of a section written at the wrong level is named where it belongs, not as a look-alike of this level.
    # The archiver refused it, while validate, generate (the Deployment's SQLite volume) and serve took it.
    (
        {"archive": {"url": "mysql://db/gpu"}},
        "archive.url: 'mysql://db/gpu' is not accepted; accepted: a SQLite file pa",
    ),
    ({"tenant_label": "team"}, "tenant_label: unknown key; did you mean 'api.tenant_label'? accepted keys: alertm"),
    ({"runbook_url": "https://x/r.md"}, "runbook_url: unknown key; did you mean 'alerts.runbook_url'? accepted keys"),
    (
        {"alerts": {"threshold": 0.9}},
        "alerts.threshold: unknown key; did you mean one of 'alerts.gpu_memory_high.threshold', "
        "'alerts.host_memory_high.threshold', 'alerts.power_throttling.threshold', 'alerts.gpu_underutilized.thr",
    ),
    (
        {"dashboards": {"host_identity": "scrape"}},
        "dashboards.host_identity: unknown key; did you mean 'node.host_identity'? accepted keys in dashboards:",
    ),
    (
        {"attribution": {"mod": "label"}},
        "attribution.mod: unknown key; did you mean 'mode'? accepted keys in attribution: kubernetes_metric",
    ),
    (
        {"attribution": {"mode": "slurm"}},
        "attribution.mode: 'slurm' is not accepted; accepted: label, mapping, kubernetes",
    ),
    ({"attribution": "label"}, "attribution: expected a mapping of keys, got str"),
    ({"vendors": ["nvidia", "intel"]}, "vendors: 'intel' is not accepted; accepted: nvidia, amd"),
    ({"vendors": []}, "vendors: expected a non-empty list"),
    (
        {"amd": {"metric_prefixes": ["amd-"]}},
        "amd.metric_prefixes: 'amd-' is not accepted; expected a metric-name prefix",
    ),
    (
        {"amd": {"model_names": {"MI300X(": "x"}}},
        "amd.model_names: 'MI300X(' is not accepted; keys are regular expressions",
    ),
    (
        {"amd": {"model_names": {".*MI300X.*": ""}}},
        "amd.model_names..*MI300X.*: '' is not accepted; expected a model name",
    ),
    (
        {"amd": {"targets": "job=dcgm"}},
        "amd.targets: 'job=dcgm' is not accepted; expected comma-separated label matchers",
    ),
    ({"execution_label": 7}, "execution_label: expected a label name, got 7"),
    ({"rule_interval": 15}, "rule_interval: expected a Prometheus duration such as 30s, 5m or 1h30m, got 15"),
    ({"api": {"tenant_label": 7}}, "api.tenant_label: expected a label name, got 7"),
    ({"dcgm": {"generations": [4.8, 4.10]}}, "dcgm.generations: 4.8 is a number (YAML reads unquoted 4.10 as 4.1)"),
    ({"dcgm": {"generations": [4.8]}}, "write each in quotes: '3.3', '4.8', '4.9', '4.10'"),
    ({"execution_label": "execution-id"}, "execution_label: 'execution-id' is not accepted; expected a label name"),
    ({"rate_window": "1 minute"}, "rate_window: '1 minute' is not accepted; expected a Prometheus duration"),
    ({"rate_window": "0s"}, "rate_window: '0s' is not accepted; expected a Prometheus duration above zero"),
    ({"rate_window": ""}, "rate_window: '' is not accepted; expected a Prometheus duration above zero such as 30s"),
    ({"rate_window": "2m", "rate_window_fallback": "1m"}, "rate_window_fallback: 1m is shorter than rate_window (2m)"),
    ({"derived_rule_interval": "1 m"}, "derived_rule_interval: '1 m' is not accepted; expected a Prometheus"),
    ({"derived_rule_interval": "1 m"}, "such as 30s, 5m or 1h30m (at most 292y) (or empty)"),
    ({"node": {"cpu_rate_interval": "1 m"}}, "node.cpu_rate_interval: '1 m' is not accepted; expected a Prometheus"),
    ({"node": {"cpu_rate_interval": "0s"}}, "node.cpu_rate_interval: '0s' is not accepted"),
    ({"selectors": {"dcgm": "job=dcgm"}}, "selectors.dcgm: 'job=dcgm' is not accepted; expected comma-separated label"),
    ({"selectors": {"dcgm": "job=dcgm"}}, "(expected a value in double quotes at 'dcgm')"),
    # Prometheus would refuse the rules: \d is no escape in a PromQL string (a regex digit is "\\d").
    ({"selectors": {"node": 'job=~"node\\d"'}}, "selectors.node: 'job=~\"node\\\\d\"' is not accepted"),
    ({"selectors": {"node": 'job=~"node\\d"'}}, "(unknown escape '\\\\d'"),
    ({"attribution": {"mapping_selector": 'source="slurm",'}}, "attribution.mapping_selector: 'source=\"slurm\",' is"),
    ({"dcgm": {"generations": []}}, "dcgm.generations: expected a non-empty list"),
    ({"dcgm": {"generations": ["4.7"]}}, "dcgm.generations: '4.7' is not accepted; accepted: 3.3, 4.8, 4.9, 4.10"),
    ({"dcgm": {"violation_counter_unit": "ms"}}, "dcgm.violation_counter_unit: 'ms' is not accepted; accepted: ns, us"),
    (
        {"node": {"host_regex": "[a-z"}},
        "node.host_regex: '[a-z' is not accepted; expected a regular expression",
    ),
    ({"node": {"host_regex": ".+"}}, "expected a regular expression with one capture group"),
    (
        {"alerts": {"gpu_memory_high": {"threshold": 95}}},
        "alerts.gpu_memory_high.threshold: 95.0 is not accepted; expected a ratio above 0 and at most 1",
    ),
    ({"alerts": {"gpu_memory_high": {"threshold": "high"}}}, "alerts.gpu_memory_high.threshold: expected a number"),
    ({"alerts": {"gpu_memory_high": {"severity": "page"}}}, "severity: 'page' is not accepted; accepted: critical"),
    (
        {"alerts": {"gpu_memory_high": {"for_": "5m"}}},
        "alerts.gpu_memory_high.for_: unknown key; did you mean 'for'? accepted keys in alerts.gpu_memory_high: for, "
        "severity, threshold",
    ),
    ({"alerts": {"thermal_throttling": {"threshold_celsius": -3}}}, "threshold_celsius: -3.0 is not accepted"),
    (
        {"alerts": {"host_memory_exhaustion": {"min_level": 1}}},
        "alerts.host_memory_exhaustion.min_level: must be below 1",
    ),
    ({"output": {"rules_dir": " "}}, "output.rules_dir: ' ' is not accepted; expected a non-empty path"),
    ({"api": {"prometheus_url": "prometheus:9090"}}, "api.prometheus_url: 'prometheus:9090' is not accepted; "),
    ({"api": {"prometheus_url": "http://h:9090/prom?x=1"}}, "expected an http:// or https:// URL (a path is a prefix"),
    ({"api": {"tenant_header": "X Scope"}}, "api.tenant_header: 'X Scope' is not accepted; expected an HTTP header"),
    ({"api": {"tenant_id": "a\nb"}}, "api.tenant_id: 'a\\nb' is not accepted; expected printable ASCII"),
    ({"api": {"partial_response": "false"}}, "api.partial_response: expected true or false, got 'false'"),
    ({"sharding": {"amd_port": 70000}}, "sharding.amd_port: 70000 is not accepted; expected a TCP port from 1 to"),
    ({"sharding": {"amd_job": " "}}, "sharding.amd_job: ' ' is not accepted; expected a non-empty name on one line"),
    ({"sharding": {"amd_file_sd": ""}}, "sharding.amd_file_sd: '' is not accepted; expected a non-empty path"),
    ({"sharding": {"amd_pod_selector": ""}}, "sharding.amd_pod_selector: '' is not accepted; expected a non-empty"),
    ({"sharding": {"amd_port_name": "a\nb"}}, "sharding.amd_port_name: 'a\\nb' is not accepted; expected a non-"),
    ({"sharding": {"amd_hosts": "mi300x-01"}}, "sharding.amd_hosts: expected a list, got 'mi300x-01'"),
    (
        {"vendors": ["nvidia"], "sharding": {"amd_hosts": ["mi300x-01"]}},
        "sharding.amd_hosts: lists hosts to scrape for device-metrics-exporter, but vendors (nvidia) has no amd",
    ),
    (
        {"vendors": ["amd"], "sharding": {"hosts": ["mi300x-01"]}},
        "sharding.hosts: lists hosts to scrape for dcgm-exporter, but vendors (amd) has no nvidia; AMD GPU hosts go",
    ),
    (
        {"sharding": {"amd_job": "dcgm-exporter"}},
        "sharding.amd_job: 'dcgm-exporter' is also sharding.dcgm_job; each scrape job needs a name of its own",
    ),
    ({"sharding": {"node_job": "device-metrics-exporter"}}, "sharding.node_job: 'device-metrics-exporter' is also"),
    (["a", "b"], "top level: expected a mapping of keys, got list"),
]


@pytest.mark.parametrize(("data", "message"), BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_values_name_the_key_and_what_is_accepted(data, message):
    with pytest.raises(ConfigError) as err:
        config_from_mapping(data, "pack.yml")
    assert str(err.value).startswith("pack.yml: ")
    assert message in str(err.value)


def test_an_unwritten_scrape_job_may_share_a_name():
    """vendors [nvidia] writes no device-metrics-exporter job: its name clashes with nothing."""
    cfg = config_from_mapping({"vendors": ["nvidia"], "sharding": {"shards": 2, "amd_job": "dcgm-exporter"}})
    assert cfg.sharding.amd_job == cfg.sharding.dcgm_job


def test_a_selector_set_without_the_loader_is_checked_too():
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(Config().selectors, dcgm_targets="job=gpu")
    assert str(err.value).startswith("selectors.dcgm_targets: 'job=gpu' is not accepted")


def test_an_empty_derived_rule_interval_is_the_served_groups_interval():
    """As its doc says: empty evaluates the groups reading recorded series at rule_interval."""
    cfg = config_from_mapping({"rule_interval": "30s", "derived_rule_interval": ""}, "pack.yml")
    assert cfg.derived_interval == "30s"
    groups = {g.name.rsplit(".", 1)[1]: g.interval for g in recording_groups(cfg)}
    assert groups["execution"] == groups["cost"] == groups["execution_gpu"] == "30s"


def test_unreadable_and_invalid_files_are_named(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"missing\.yml: cannot read the config file"):
        load_config(tmp_path / "missing.yml")
    broken = tmp_path / "broken.yml"
    broken.write_text("alerts: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yml: not valid YAML"):
        load_config(broken)


def test_a_config_file_is_refused_on_one_line_naming_the_file_and_the_problem(tmp_path: Path):
    """A file saved in Latin-1, a YAML error and a key written twice (PyYAML would keep the second silently):
    each a ConfigError on one line naming the file and where, never a traceback or a quietly dropped key."""
    cases = {
        "latin1.yml": (
            "# \xc9quipe GPU\nvendors: [nvidia]\n".encode("latin-1"),
            "not UTF-8 text (byte 0xc9 on line 1)",
        ),
        "broken.yml": (b"vendors: [nvidia\nnode: {\n", "not valid YAML at line 2, column 5"),
        "twice.yml": (
            b"vendors: [nvidia]\nnode:\n  host_identity: scrape\nvendors: [amd]\n",
            "line 4, column 1: key 'vendors' is written twice (first on line 1)",
        ),
        "flow.yml": (b"node: {host_identity: scrape, host_identity: map}\n", "'host_identity' is written twice"),
    }
    for name, (content, said) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ConfigError) as err:
            load_config(tmp_path / name)
        assert str(err.value).startswith(str(tmp_path / name)) and said in str(err.value), err.value
        assert "\n" not in str(err.value)


def test_a_yaml_merge_overridden_by_a_key_is_not_a_key_written_twice(tmp_path: Path):
    merged = tmp_path / "merged.yml"
    merged.write_text("a: &x {b: 1, c: 1}\nd:\n  <<: *x\n  b: 2\n")
    assert read_yaml(merged) == {"a": {"b": 1, "c": 1}, "d": {"b": 2, "c": 1}}


def test_empty_file_means_defaults(tmp_path: Path):
    empty = tmp_path / "empty.yml"
    empty.write_text("# nothing set\n")
    cfg = load_config(empty)
    # The output folders are the defaults' names, in the config file's folder.
    assert (cfg.output.rules_dir, cfg.output.docs_dir) == (str(tmp_path / "rules"), str(tmp_path / "docs"))
    assert dataclasses.replace(cfg, output=Config().output) == Config()


def test_relative_paths_are_read_from_the_config_files_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "config").mkdir()
    config = tmp_path / "config" / "pack.yml"
    config.write_text("output: {rules_dir: ../prometheus/rules}\napi: {keys_file: keys.txt}\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config("config/pack.yml")
    assert cfg.output.rules_dir == "prometheus/rules"  # relative to the working directory, where it lies under it
    assert cfg.api.keys_file == "config/keys.txt"
    assert cfg.output.dashboards_dir == "config/dashboards"


def _leaf_fields(obj, prefix=""):
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _leaf_fields(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


def test_every_key_says_what_it_is_and_why_to_change_it():
    for key, f in _leaf_fields(Config()):
        assert len(f.metadata.get("doc", "")) > 20, key
        assert len(f.metadata.get("why", "")) > 10, key


def test_generated_docs_are_current():
    for path, text in build.docs_outputs(Config()).items():
        assert (REPO / path).read_text() == text, f"{path} is stale: run `make docs`"


def test_defaults_yaml_round_trips_to_the_defaults():
    import yaml

    assert config_from_mapping(yaml.safe_load(config_docs.defaults_yaml())) == Config()


def test_throttling_alerts_refuse_to_page():
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"alerts": {"power_throttling": {"severity": "critical"}}}, "pack.yml")
    assert (
        str(err.value)
        == "pack.yml: alerts.power_throttling.severity: 'critical' is not accepted; accepted: warning, info"
    )


def test_telemetry_window_must_outlast_its_for():
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"alerts": {"telemetry_missing": {"window": "10m", "for": "10m"}}}, "pack.yml")
    assert "alerts.telemetry_missing.window: 10m must be longer than its for (10m)" in str(err.value)


def test_api_execution_id_pattern_must_compile():
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"api": {"execution_id_pattern": "[a-"}}, "pack.yml")
    assert str(err.value).startswith("pack.yml: api.execution_id_pattern: not a regular expression")


def test_a_file_far_larger_than_a_config_is_refused_without_reading_it_all(tmp_path: Path):
    """-c naming a log or an image by mistake (or /dev/zero, which never ends): refused after a MiB."""
    big = tmp_path / "big.yml"
    big.write_text("# " + "x" * 2**20 + "\n")
    with pytest.raises(ConfigError, match=r"big\.yml: larger than 1 MiB: not a config file"):
        load_config(big)
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config("/dev/zero")


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        # Go's time.Duration ends near 292 years: Prometheus refuses a rule file holding a longer one.
        (
            {"rate_window_fallback": "300y"},
            "rate_window_fallback: '300y' is not accepted; expected a Prometheus duration above zero such as 30s, "
            "5m or 1h30m (at most 292y)",
        ),
        ({"alerts": {"gpu_underutilized": {"for": "293y"}}}, "alerts.gpu_underutilized.for: '293y' is not accepted"),
        # Reserved: a rule cannot make __name__ (or any __ label) an execution's label.
        ({"execution_label": "__name__"}, "execution_label: '__name__' is not accepted; expected a label name"),
        # Every rule reading the selector would be refused by Prometheus: missing closing ].
        ({"selectors": {"dcgm": 'job=~"["'}}, 'selectors.dcgm: job=~"[" is not a regular expression (unterminated'),
        ({"attribution": {"kubernetes_selector": 'pod!~"(a"'}}, 'attribution.kubernetes_selector: pod!~"(a" is not a'),
        # A Kubernetes namespace (RFC 1123), not a Prometheus label name.
        ({"kubernetes": {"namespace": "Bad_NS"}}, "kubernetes.namespace: 'Bad_NS' is not accepted"),
        # One point is no series (the step is the window over points less one), nor is a fraction of one.
        ({"api": {"max_points": 1}}, "api.max_points: 1 is not accepted; expected a whole number of 2 or more"),
        ({"api": {"max_points": 1.5}}, "api.max_points: 1.5 is not accepted"),
    ],
    ids=["duration", "alert-for", "reserved-label", "regex", "regex-k8s", "namespace", "one-point", "fraction"],
)
def test_values_prometheus_or_the_endpoint_cannot_use_are_refused_naming_the_key(mapping: dict, message: str):
    """Each passed before, and generate wrote rule files Prometheus refuses (exit 0, over good ones), or the
    endpoint answered 500."""
    with pytest.raises(ConfigError) as err:
        config_from_mapping(mapping, "pack.yml")
    assert str(err.value).startswith(f"pack.yml: {message}"), err.value


def test_a_kubernetes_namespace_with_dashes_is_accepted():
    assert config_from_mapping({"kubernetes": {"namespace": "kube-prometheus-stack"}}).kubernetes.namespace == (
        "kube-prometheus-stack"
    )


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        # A list item that is no string said "accepted: " and nothing after it.
        ({"alertmanager": {"group_by": [5]}}, "alertmanager.group_by: 5 is not accepted; each item must be a string"),
        ({"vendors": [5]}, "vendors: 5 is not accepted; each item must be one of 'nvidia', 'amd'"),
        ({"sharding": {"amd_hosts": [None]}}, "sharding.amd_hosts: null is not accepted; each item must be a string"),
        # YAML's words, not Python's (None, True).
        ({"rate_window": None}, "rate_window: expected a Prometheus duration such as 30s, 5m or 1h30m, got null"),
        ({"api": {"partial_response": 1}}, "api.partial_response: expected true or false, got 1"),
        ({None: 1}, "null: unknown key"),
        # YAML 1.1 reads 1e20 as text: say how to write the number.
        (
            {"api": {"max_points": "1e20"}},
            "api.max_points: expected a number, got '1e20' (YAML reads 1e20 as text: write 100000000000000000000)",
        ),
    ],
    ids=["item-number", "vendor-number", "item-null", "null", "one", "null-key", "exponent"],
)
def test_a_wrong_value_is_said_in_yamls_words_and_what_is_accepted(mapping: dict, message: str):
    with pytest.raises(ConfigError) as err:
        config_from_mapping(mapping, "pack.yml")
    assert str(err.value).startswith(f"pack.yml: {message}"), err.value


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"sharding": {"shards": 1000}}, "sharding.shards: 1000 is not accepted; expected 0 (one Prometheus) to 128"),
        (
            {"sharding": {"hosts": ["bad host/../x"]}},
            "sharding.hosts: 'bad host/../x' is not accepted; expected a host",
        ),
        ({"sharding": {"amd_hosts": [""]}}, "sharding.amd_hosts: '' is not accepted; expected a host name"),
        ({"dashboards": {"datasource_url": "nope"}}, "dashboards.datasource_url: 'nope' is not accepted"),
        ({"dashboards": {"datasource_name": ""}}, "dashboards.datasource_name: '' is not accepted"),
        ({"dashboards": {"price_per_gpu_hour": {"X": float("nan")}}}, "dashboards.price_per_gpu_hour.X: .nan is not"),
        # The endpoint refuses a step past a year: `archive` failed at its first record, naming no key.
        ({"archive": {"step": "2y"}}, "archive.step: '2y' is not accepted; expected a duration of at most 1y"),
        ({"archive": {"image": ""}}, "archive.image: '' is not accepted"),
    ],
    ids=["shards", "host-path", "host-empty", "datasource-url", "datasource-name", "price-nan", "step", "image"],
)
def test_what_generate_writes_into_deployments_is_checked_first(mapping: dict, message: str):
    """Each was written as given: 5,000 files for a typo of shards, a target `bad host/../x:9400`, a datasource
    Grafana cannot reach, vector(nan) as a price."""
    with pytest.raises(ConfigError) as err:
        config_from_mapping(mapping, "pack.yml")
    assert str(err.value).startswith(f"pack.yml: {message}"), err.value


def test_hosts_by_name_and_address_are_accepted():
    hosts = ("gpu-01.example.com", "10.0.0.1", "[fd00::1]", "gpu_02")
    assert config_from_mapping({"sharding": {"hosts": list(hosts)}}).sharding.hosts == hosts


def test_a_value_in_a_message_is_spelt_as_yaml_writes_it():
    """The user wrote YAML: a boolean price is `true` in the message, not Python's `True`."""
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"dashboards": {"price_per_gpu_hour": {"NVIDIA A100": True}}}, "pack.yml")
    assert str(err.value) == (
        "pack.yml: dashboards.price_per_gpu_hour.NVIDIA A100: true is not accepted; expected a price of 0 or more"
    )
