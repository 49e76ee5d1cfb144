"""Generation is deterministic, the committed output is current, and failures write nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import build, catalog, cli, output, testsuites
from gpu_execution_pack.config import Config, ConfigError, config_from_mapping, load_config
from gpu_execution_pack.output import write_all
from gpu_execution_pack.promql import selector
from gpu_execution_pack.rules.files import all_groups, rule_files
from gpu_execution_pack.rules.groups import MAX_RULES_PER_GROUP, RecordingRule, in_dependency_order

from .conftest import REPO


def test_two_generations_give_identical_bytes(tmp_path: Path):
    cfg_file = tmp_path / "pack.yml"
    for run in ("a", "b"):
        cfg_file.write_text(f"output: {{rules_dir: {tmp_path / run}, dashboards_dir: {tmp_path / run / 'dash'}}}\n")
        assert cli.main(["generate", "--config", str(cfg_file)]) == 0
        assert cli.main(["dashboards", "--config", str(cfg_file)]) == 0
    first = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*.*")}
    second = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*.*")}
    assert first and first == second
    assert any(p.suffix == ".json" for p in first) and any(p.name.endswith(".rules.yml") for p in first)


def test_libyaml_writes_the_bytes_the_pure_python_emitter_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The pack writes YAML with libyaml's emitter for speed; every document must come out as PyYAML's own
    emitter writes it: the rule files of every variant, the archive rules, Alertmanager routes and promtool
    suites (the YAML inside docs/*.md is held to its committed bytes by the test below)."""
    if not yaml.__with_libyaml__ and not os.environ.get("CI"):
        # A PyYAML built without libyaml (a source build): the pack writes with the pure-Python emitter, and
        # there is no second emitter to compare. CI installs PyYAML's wheels, which carry it: there it must run.
        pytest.skip("PyYAML has no libyaml here: the pack writes with the pure-Python emitter")
    assert output.DUMPER.__mro__[1] is yaml.CSafeDumper
    documents: list[object] = []
    to_yaml = output.to_yaml

    def kept(data: object, dumper: type[yaml.SafeDumper] = output.DUMPER) -> str:
        documents.append(data)
        return to_yaml(data, dumper)

    monkeypatch.setattr(output, "to_yaml", kept)
    pure_python = output.block_dumper(yaml.SafeDumper)
    build.generated_files(Config())
    variants = testsuites.default_variants()
    for variant in variants[1:]:
        rule_files(variant.config, tmp_path / variant.name)
    executions = frozenset({"mig-0003", "hot-0014", "amd-healthy"})
    testsuites.suite_files(variants[:1], tmp_path, executions=executions)  # the other variants' suites: alike
    assert len(documents) > 30
    different = [d for d in documents if to_yaml(d) != to_yaml(d, pure_python)]
    assert not different, to_yaml(different[0], pure_python)[:2000]


def test_the_pack_writes_yaml_with_libyaml_where_pyyaml_has_it_else_with_pyyamls_own_emitter():
    expected = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper
    assert output.DUMPER.__mro__[1] is expected
    # Keys in the order given, a multi-line string (a PromQL expression) as a literal block.
    assert output.to_yaml({"expr": "a\nb\n", "k": [1]}) == "expr: |\n  a\n  b\nk:\n- 1\n"


def test_committed_output_and_docs_are_current():
    files = build.generated_files(Config())
    assert {p for p in files if p.parts[0] == "docs"} == {
        Path(f"docs/{n}.md") for n in ("runbook", "report", "configuration", "series")
    }
    stale = [str(p) for p, text in files.items() if not (REPO / p).exists() or (REPO / p).read_text() != text]
    assert not stale, f"stale generated files, run `make rules dashboards docs`: {stale}"


@pytest.mark.single_version
@pytest.mark.e2e
def test_a_users_config_generates_and_checks_only_its_own_files(tmp_path: Path):
    """Paths come from the config file's folder; with a config, the pack's own reference docs are not involved."""
    ops = tmp_path / "ops"
    (ops / "config").mkdir(parents=True)
    config = ops / "config" / "pack.yml"
    config.write_text("output: {rules_dir: ../prom, dashboards_dir: ../graf, docs_dir: ../runbooks}\n")
    cfg = load_config(config)
    files = build.generated_files(cfg, "config/pack.yml")
    tops = {p.relative_to(ops).parts[0] for p in map(Path.resolve, files)}
    assert tops == {"prom", "graf", "runbooks"}
    assert {p.name for p in files if p.parent.name == "runbooks"} == {"runbook.md", "report.md"}


def test_output_dir_overrides_the_config(tmp_path: Path):
    assert cli.main(["generate", "--output-dir", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "alerts.rules.yml").exists()
    assert cli.main(["docs", "-o", str(tmp_path / "books")]) == 0
    assert (tmp_path / "books" / "runbook.md").read_text() == (REPO / "docs" / "runbook.md").read_text()


def test_check_command_fails_on_stale_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cfg_file = tmp_path / "pack.yml"
    cfg_file.write_text(f"output: {{rules_dir: {tmp_path / 'rules'}}}\n")
    assert cli.main(["generate", "--config", str(cfg_file)]) == 0
    rule_file = tmp_path / "rules" / "execution-gpu.rules.yml"
    rule_file.write_text(rule_file.read_text().replace("max by", "min by", 1))
    assert cli.main(["check", "--config", str(cfg_file)]) == 1
    assert "execution-gpu.rules.yml" in capsys.readouterr().err


def test_every_generated_yaml_file_says_do_not_edit():
    # JSON has no comments: dashboards are provisioned read-only instead (allowUiUpdates: false).
    for path in (p for p in build.generated_files(Config()) if p.suffix != ".json"):
        first = path.read_text().splitlines()[0] if path.exists() else ""
        assert "DO NOT EDIT" in first, path


def test_groups_stay_within_mimirs_limit_and_have_unique_names():
    groups = all_groups(Config())
    assert len({g.name for g in groups}) == len(groups)
    for g in groups:
        assert 0 < len(g.rules) <= MAX_RULES_PER_GROUP, g.name


def test_a_bad_config_leaves_previous_output_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    rules = tmp_path / "rules"
    good = tmp_path / "good.yml"
    good.write_text(f"output: {{rules_dir: {rules}}}\n")
    assert cli.main(["generate", "--config", str(good)]) == 0
    before = {p: p.read_bytes() for p in rules.rglob("*") if p.is_file()}
    bad = tmp_path / "bad.yml"
    bad.write_text(f"output: {{rules_dir: {rules}}}\nattribution: {{mode: slurm}}\n")
    assert cli.main(["generate", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yml: attribution.mode: 'slurm' is not accepted" in err
    assert {p: p.read_bytes() for p in rules.rglob("*") if p.is_file()} == before


def test_write_all_writes_nothing_when_one_file_fails(tmp_path: Path):
    ok = tmp_path / "a.rules.yml"
    ok.write_text("old\n")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be\n")
    with pytest.raises(OSError):
        write_all({ok: "new\n", blocker / "b.rules.yml": "new\n"})
    assert ok.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.rules.yml", "not-a-dir"]  # no temp files left


def test_write_all_leaves_no_folder_it_made_when_a_file_fails(tmp_path: Path):
    """`generate -o new/rules` on a full disk (here: a file that cannot be written) left `new/rules` behind, empty."""
    blocker = tmp_path / "taken"
    blocker.write_text("a file where a directory should be\n")
    with pytest.raises(OSError):
        write_all({tmp_path / "new" / "rules" / "a.rules.yml": "new\n", blocker / "b.rules.yml": "new\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    # A folder that was there stays, and one that holds a file it did not write.
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "mine.txt").write_text("x\n")
    with pytest.raises(OSError):
        write_all({tmp_path / "kept" / "a.rules.yml": "new\n", blocker / "b.rules.yml": "new\n"})
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["mine.txt"]


def test_served_series_follow_rule_interval_and_readers_of_recorded_series_the_derived_one():
    """The served per-GPU and per-host groups (and the host CPU rate they read) run at rule_interval, the host
    maps at node.host_map_interval (rule_interval where it is empty), the rest at derived_rule_interval."""
    served = {
        "gpu-execution-pack.amd",
        "gpu-execution-pack.host_rates",
        "gpu-execution-pack.execution_gpu",
        "gpu-execution-pack.execution_gpu_activity",
        "gpu-execution-pack.execution_node",
    }
    for overrides, fast, host_maps, slow in (
        ({}, None, "1m", "1m"),
        ({"rule_interval": "15s", "derived_rule_interval": "2m"}, "15s", "1m", "2m"),
        (
            {"rule_interval": "30s", "derived_rule_interval": "", "node": {"host_map_interval": "2m"}},
            "30s",
            "2m",
            "30s",
        ),
        ({"rule_interval": "15s", "node": {"host_map_interval": ""}}, "15s", "15s", "1m"),
        ({"node": {"host_map_interval": ""}}, None, None, "1m"),
    ):
        cfg = config_from_mapping(overrides, "pack.yml")
        files = rule_files(cfg, Path("rules"))
        groups = [g for text in files.values() for g in yaml.safe_load(text)["groups"]]
        assert len(groups) == 11
        for g in groups:
            expected = host_maps if g["name"] == "gpu-execution-pack.hosts" else fast if g["name"] in served else slow
            assert g.get("interval") == expected, (overrides, g["name"])


def test_a_host_map_interval_past_the_lookback_is_refused():
    """The per-GPU rules join the host map's newest entry within Prometheus' 5-minute lookback: an interval that
    could leave none there is a config error naming the key, not rules that silently record nothing."""
    with pytest.raises(ConfigError, match=r"node\.host_map_interval: 3m is longer than 2m"):
        config_from_mapping({"node": {"host_map_interval": "3m"}}, "pack.yml")
    assert config_from_mapping({"node": {"host_map_interval": "2m"}}, "pack.yml").node.host_map_interval == "2m"


def groups_of(cfg: Config, placement: str = "") -> dict[str, dict]:
    """Every generated group of ``cfg`` by name, with the file it is in (``file``)."""
    files = rule_files(cfg, Path("rules"), placement=placement)
    return {g["name"]: g | {"file": p.name} for p, text in files.items() for g in yaml.safe_load(text)["groups"]}


def test_the_host_cpu_rate_runs_in_a_group_of_its_own_at_cpu_rate_interval():
    """Empty (the default): each CPU's irate over the fallback window in the host_rates group at rule_interval
    (not with the host maps, which run less often), averaged over rate_window. Set: rate() over the interval
    or the fallback, whichever is longer, in that group at that interval, averaged over twice the interval or
    rate_window. Either way the group comes after the hosts group."""
    default = groups_of(Config())
    assert "interval" not in default["gpu-execution-pack.host_rates"]
    assert list(default).index("gpu-execution-pack.host_rates") == list(default).index("gpu-execution-pack.hosts") + 1
    assert "cpu_idle" not in str(default["gpu-execution-pack.hosts"]["rules"])
    rates = {r["record"]: r["expr"] for r in default["gpu-execution-pack.host_rates"]["rules"]}
    irate, rate = catalog.NODE_CPU_IDLE_RATE.name, catalog.NODE_CPU_IDLE_RATE_OVER_INTERVAL.name
    assert 'irate(node_cpu_seconds_total{mode="idle"}[4m])' in rates[irate]
    node = str(default["gpu-execution-pack.execution_node"]["rules"])
    assert f"avg_over_time({irate}[1m])" in node

    for overrides, rate_window, average_window in (
        ({"node": {"cpu_rate_interval": "1m"}}, "4m", "2m"),
        ({"node": {"cpu_rate_interval": "1m"}, "rate_window_fallback": "1m"}, "1m", "2m"),
        ({"node": {"cpu_rate_interval": "2m"}, "rate_window": "30s", "rate_window_fallback": "30s"}, "2m", "4m"),
        ({"node": {"cpu_rate_interval": "30s"}, "rate_window": "2m"}, "4m", "2m"),
    ):
        groups = groups_of(config_from_mapping(overrides, "pack.yml"))
        names = list(groups)
        rates = groups["gpu-execution-pack.host_rates"]
        assert names.index("gpu-execution-pack.host_rates") == names.index("gpu-execution-pack.hosts") + 1
        assert rates["interval"] == overrides["node"]["cpu_rate_interval"]
        assert rates["file"] == "execution-gpu.rules.yml"
        [rule] = rates["rules"]
        assert rule == {
            "record": rate,
            "expr": f'avg by (job, instance) (rate(node_cpu_seconds_total{{mode="idle"}}[{rate_window}]))',
        }
        assert "cpu_idle" not in str(groups["gpu-execution-pack.hosts"]["rules"])
        node = str(groups["gpu-execution-pack.execution_node"]["rules"])
        assert f"avg_over_time({rate}[{average_window}])" in node
        assert f"max_over_time({rate}[{average_window}])" in node
        assert irate not in node


def test_sharded_the_host_cpu_rate_is_recorded_on_each_shard():
    cfg = config_from_mapping({"node": {"cpu_rate_interval": "1m"}, "sharding": {"shards": 2}}, "pack.yml")
    assert "gpu-execution-pack.host_rates" in groups_of(cfg, placement="shard")
    assert "gpu-execution-pack.host_rates" not in groups_of(cfg, placement="ruler")


@pytest.mark.single_version
@pytest.mark.e2e
def test_check_of_a_users_config_wants_an_absolute_runbook_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "pack.yml"
    config.write_text("alerts: {runbook_url: runbooks/gpu.md}\n")
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", str(config)]) == 0
    assert cli.main(["check", "--config", str(config)]) == 1
    assert "alerts.runbook_url 'runbooks/gpu.md' is not an absolute http(s) URL" in capsys.readouterr().err
    config.write_text("alerts: {runbook_url: 'https://runbooks.example.org/gpu.md'}\n")
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", str(config)]) == 0
    assert cli.main(["check", "--config", str(config)]) == 0


def test_a_model_is_priced_under_the_spelling_replace_blanks_in_model_name_gives_it(tmp_path: Path):
    """dcgm-exporter --replace-blanks-in-model-name publishes `NVIDIA H100 80GB HBM3` as `NVIDIA-H100-80GB-HBM3`
    (its getGPUModel: blanks collapsed, then replaced by '-'): the listed price applies, not the default. A
    spelling listed itself keeps its own price. Checked by the real promtool on the generated cost group."""
    from gpu_execution_pack import promtool

    cfg = config_from_mapping(
        {
            "dashboards": {
                "default_price_per_gpu_hour": 2.0,
                "price_per_gpu_hour": {
                    "NVIDIA H100 80GB HBM3": 3.0,
                    "NVIDIA  L40S": 1.0,
                    "NVIDIA-L40S": 1.1,
                    # label_replace would expand $1 in the name (to nothing): the model is priced as written.
                    "NVIDIA-Lab-$1-GPU": 0.5,
                },
            }
        }
    )
    assert cfg.dashboards.model_prices() == {
        "NVIDIA  L40S": 1.0,
        "NVIDIA H100 80GB HBM3": 3.0,
        "NVIDIA-H100-80GB-HBM3": 3.0,
        "NVIDIA-L40S": 1.1,
        "NVIDIA-Lab-$1-GPU": 0.5,
    }
    paths = {p.name: p for p in write_rules(cfg, tmp_path)}
    held = catalog.MODEL_GPU_COUNT.name + '{execution_id="a", modelName="%s"}'
    suite = {
        "rule_files": [str(paths["cost.rules.yml"])],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": held % "NVIDIA-H100-80GB-HBM3", "values": "1x5"},
                    {"series": held % "NVIDIA-A10G", "values": "1x5"},
                ],
                "promql_expr_test": [
                    {
                        "expr": f'{catalog.PRICE.name}{{modelName=~"NVIDIA-.*"}}',
                        "eval_time": "2m",
                        "exp_samples": [
                            {"labels": f'{catalog.PRICE.name}{{modelName="NVIDIA-A10G"}}', "value": 2.0},
                            {"labels": f'{catalog.PRICE.name}{{modelName="NVIDIA-H100-80GB-HBM3"}}', "value": 3.0},
                            {"labels": f'{catalog.PRICE.name}{{modelName="NVIDIA-L40S"}}', "value": 1.1},
                            {"labels": f'{catalog.PRICE.name}{{modelName="NVIDIA-Lab-$1-GPU"}}', "value": 0.5},
                        ],
                    }
                ],
            }
        ],
    }
    test_file = tmp_path / "prices.test.yml"
    test_file.write_text(yaml.safe_dump(suite))
    promtool.test_rules([test_file])


def write_rules(cfg: Config, folder: Path) -> list[Path]:
    """The rule files of ``cfg`` written into ``folder``."""
    files = rule_files(cfg, folder)
    write_all(files)
    return list(files)


def test_the_headers_do_not_change_with_how_the_config_path_is_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """Else `check` calls a colleague's identical output stale (the header's command named the path as typed)."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "pack.yml").write_text(
        "vendors: [nvidia]\noutput: {rules_dir: ../rules}\nalerts: {runbook_url: https://ops.example/runbook.md}\n"
    )
    monkeypatch.chdir(tmp_path)
    spellings = ["config/pack.yml", "./config/pack.yml", "config/../config/pack.yml", str(tmp_path / "config/pack.yml")]
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", spellings[0]]) == 0
    capsys.readouterr()
    for spelling in spellings:
        assert cli.main(["generate", "--config", spelling]) == 0
        assert cli.main(["check", "--config", spelling]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.count("(0 changed)") == len(spellings)
    header = (tmp_path / "rules" / "alerts.rules.yml").read_text().splitlines()[1]
    assert header == "# Regenerate: gpu-execution-pack generate --config config/pack.yml"


def ops_config(root: Path, repository: bool) -> Path:
    """An ops folder's config, ``root/ops/config/pack.yml``, writing beside it; ``root`` a repository's root (a
    ``.git`` in it) if ``repository``."""
    if repository:
        (root / ".git").mkdir()
    config = root / "ops" / "config" / "pack.yml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "vendors: [nvidia]\noutput: {rules_dir: ../rules, dashboards_dir: ../dash, docs_dir: ../docs}\n"
        "alerts: {runbook_url: https://ops.example/runbook.md}\n"
    )
    return config


def test_the_headers_do_not_change_with_the_folder_the_command_runs_in_within_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """An ops folder in a monorepo: `make -C ops` generates from ops/, CI checks from the root or elsewhere. The
    headers name the config from the repository's root, so each run sees the same files, none stale."""
    config = ops_config(tmp_path, repository=True)
    runs = [(tmp_path / "ops", "config/pack.yml"), (tmp_path, "ops/config/pack.yml"), (config.parent, "pack.yml")]
    monkeypatch.chdir(runs[0][0])
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", runs[0][1]]) == 0
    capsys.readouterr()
    for folder, typed in runs:
        monkeypatch.chdir(folder)
        assert cli.main(["check", "--config", typed]) == 0, capsys.readouterr().err
        assert cli.main(["generate", "--config", typed]) == 0
        assert "(0 changed)" in capsys.readouterr().out
    header = (tmp_path / "ops" / "rules" / "alerts.rules.yml").read_text().splitlines()[1]
    assert header == "# Regenerate: gpu-execution-pack generate --config ops/config/pack.yml"


def test_a_headers_command_pasted_in_a_folder_below_the_root_reads_the_config_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """A header names the config from the repository's root (`--config ops/config/pack.yml`); pasted in `ops/`, where
    `make` runs, the command said no such file. It reads the file the header names now; a name that is a file in
    the working directory still means that file, and one that is neither is still the error naming it."""
    config = ops_config(tmp_path, repository=True)
    monkeypatch.chdir(tmp_path)
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", "ops/config/pack.yml"]) == 0
    header = (tmp_path / "ops" / "rules" / "alerts.rules.yml").read_text().splitlines()[1]
    pasted = header.removeprefix("# Regenerate: gpu-execution-pack ").split()
    assert pasted == ["generate", "--config", "ops/config/pack.yml"], header
    monkeypatch.chdir(tmp_path / "ops")
    capsys.readouterr()
    assert cli.main(pasted) == 0
    out, err = capsys.readouterr()
    assert "(0 changed)" in out and f"read from the repository's root ({tmp_path})" in err, err
    # Spelt from the working directory (`./`, `..`), a path is read as typed, as a header never spells one.
    for typed in ("./ops/config/pack.yml", "../ops/config/pack.yml"):
        assert cli.main(["check", "--config", typed]) == (0 if typed.startswith("..") else 2), typed
        assert "repository's root" not in capsys.readouterr().err, typed
    assert cli.main(["check", "--config", "ops/config/pack.yml"]) == 0, capsys.readouterr().err
    # The working directory's own file of that name comes first.
    own = tmp_path / "ops" / "ops" / "config" / "pack.yml"
    own.parent.mkdir(parents=True)
    own.write_text(config.read_text().replace("../rules", "../elsewhere"))
    capsys.readouterr()
    assert cli.main(["check", "--config", "ops/config/pack.yml"]) == 1
    assert "\n  ops/elsewhere/alerts.rules.yml (missing)\n" in capsys.readouterr().err  # ops/ops/elsewhere, from ops/
    capsys.readouterr()
    assert cli.main(["check", "--config", "ops/config/missing.yml"]) == 2
    assert "ops/config/missing.yml" in capsys.readouterr().err


def test_check_does_not_call_a_file_stale_for_how_its_header_names_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """Outside a repository (a container given the ops folder without .git) the header names the config from the
    working directory: generated from ops/, checked from ops/config/, the files are the same all the same. A
    change of what they hold is still stale."""
    config = ops_config(tmp_path, repository=False)
    monkeypatch.chdir(tmp_path / "ops")
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", "config/pack.yml"]) == 0
    monkeypatch.chdir(config.parent)
    assert cli.main(["check", "--config", "pack.yml"]) == 0, capsys.readouterr().err
    # A file an older pack wrote into the folder users apply whole is named (not a failure: it may be theirs).
    leftover = tmp_path / "ops" / "rules" / "kubernetes" / "archive.yaml"
    leftover.write_text("kind: Deployment\n")
    capsys.readouterr()
    assert cli.main(["check", "--config", "pack.yml"]) == 0
    assert f"note: {leftover} is not among the files the pack generates" in capsys.readouterr().err
    rules = tmp_path / "ops" / "rules" / "alerts.rules.yml"
    rules.write_text(rules.read_text().replace("severity: warning", "severity: info", 1))
    capsys.readouterr()
    assert cli.main(["check", "--config", "pack.yml"]) == 1
    assert "rules/alerts.rules.yml" in capsys.readouterr().err


@pytest.mark.parametrize(
    "mapping",
    [
        {},
        {"node": {"host_identity": "scrape"}, "dcgm": {"generations": ["4.8"]}, "vendors": ["nvidia"]},
        {"vendors": ["amd"]},
        {"cluster_label": "cluster", "rule_interval": "30s"},
    ],
    ids=["defaults", "doctor-like", "amd", "clusters"],
)
def test_a_rule_reads_only_series_recorded_before_it_in_its_group(mapping: dict):
    """A group evaluates its rules in order at one instant: a rule that reads a series a later rule of its group
    records reads the sample of the evaluation before (one interval late, and nothing at a series' first). The
    memory capacity reads the device's memory use, recorded after it in the catalog's order."""
    for group in all_groups(config_from_mapping(mapping, "test")):
        recorded = [r.record for r in group.rules if isinstance(r, RecordingRule)]
        for i, rule in enumerate(group.rules):
            later = set(recorded[i + 1 :]) if isinstance(rule, RecordingRule) else set()
            assert not rule.tree.metric_names() & later, (
                f"{group.name}: {getattr(rule, 'record', '')} reads a later rule"
            )


def test_in_dependency_order_moves_a_rule_after_what_it_reads_and_refuses_a_cycle():
    util, total, ratio = (selector(n) for n in ("a:util", "a:total", "a:ratio"))
    first = RecordingRule("a:ratio", util / total)
    rules = (first, RecordingRule("a:util", selector("raw")), RecordingRule("a:total", selector("raw2")))
    assert [r.record for r in in_dependency_order(rules)] == ["a:util", "a:total", "a:ratio"]
    # Already in order: unchanged, whatever the names.
    assert in_dependency_order(rules[1:]) == rules[1:]
    cycle = (RecordingRule("a:util", ratio * 1), RecordingRule("a:ratio", util * 1))
    with pytest.raises(ValueError, match="a:util, a:ratio"):
        in_dependency_order(cycle)


def test_generate_names_the_files_it_wrote_before_and_writes_no_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """An upgrade: the archiver's Deployment left rules/kubernetes/ (a folder users apply whole) for rules/archive/;
    the copy an older pack wrote there must be named, as a rule file no longer written is, not silently kept."""
    rules = tmp_path / "rules"
    (rules / "kubernetes").mkdir(parents=True)
    (rules / "kubernetes" / "archive.yaml").write_text("kind: Deployment\n")
    (rules / "gone.rules.yml").write_text("groups: []\n")
    assert cli.main(["generate", "--output-dir", str(rules)]) == 0
    err = capsys.readouterr().err
    for old in ("kubernetes/archive.yaml", "gone.rules.yml"):
        assert f"note: {rules / old} is not among the files the pack generates" in err, err
    assert (rules / "archive" / "gpu-execution-pack-archive.kubernetes.yaml").exists()
    assert {p.name for p in (rules / "kubernetes").iterdir()} >= {"alerts.prometheusrule.yaml", "archive.yaml"}


def test_check_fails_on_a_rule_file_the_pack_wrote_before_and_not_on_a_users_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """An upgrade that renames a group's file leaves the old one beside the new: Prometheus loading the folder
    evaluates both. `check` must fail on a file with the pack's header that it no longer writes, and only note a
    file of the user's own."""
    rules = tmp_path / "rules"
    cfg_file = tmp_path / "pack.yml"
    cfg_file.write_text(
        f"output: {{rules_dir: {rules}, dashboards_dir: {tmp_path / 'dashboards'}, docs_dir: {tmp_path / 'docs'}}}\n"
        "alerts: {runbook_url: 'https://runbooks.example.org/gpu.md'}\n"
    )
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", str(cfg_file)]) == 0
    own = rules / "team.rules.yml"
    own.write_text("groups: []\n")
    assert cli.main(["check", "--config", str(cfg_file)]) == 0
    assert f"{own} is not among the files the pack generates; remove it" in capsys.readouterr().err
    # An older pack's file, header and all (0.2.0 called the per-GPU group's file gpu.rules.yml).
    old = rules / "gpu.rules.yml"
    old.write_text(
        "# Generated by gpu-execution-pack 0.2.0 from gpu_execution_pack/rules/. DO NOT EDIT.\n"
        "# Regenerate: gpu-execution-pack generate\ngroups: []\n"
    )
    assert cli.main(["check", "--config", str(cfg_file)]) == 1
    err = capsys.readouterr().err
    assert f"{old} was generated by gpu-execution-pack and is not generated any more: delete it" in err, err
    assert "1 file(s) the pack generated before and no longer writes" in err, err


def test_check_says_which_stale_files_are_missing_and_which_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A file never generated (a new dashboard after an upgrade) and one edited by hand call for different looks."""
    cfg_file = tmp_path / "pack.yml"
    cfg_file.write_text(
        f"output: {{rules_dir: {tmp_path / 'rules'}, dashboards_dir: {tmp_path / 'dashboards'}, "
        f"docs_dir: {tmp_path / 'docs'}}}\nalerts: {{runbook_url: 'https://runbooks.example.org/gpu.md'}}\n"
    )
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", str(cfg_file)]) == 0
    (tmp_path / "dashboards" / "fleet.json").unlink()
    edited = tmp_path / "rules" / "cost.rules.yml"
    edited.write_text(edited.read_text() + "# tuned by hand\n")
    capsys.readouterr()
    assert cli.main(["check", "--config", str(cfg_file)]) == 1
    err = capsys.readouterr().err
    assert f"  {tmp_path / 'dashboards' / 'fleet.json'} (missing)" in err, err
    assert f"  {edited} (differs)" in err, err
