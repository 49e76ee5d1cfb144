"""``doctor --write-config`` without a Prometheus: the suggested config built from hand-made deployment facts
(``advice.suggested_config``), the all-or-nothing writer under it (``output.write_all``), and the command end
to end with the probe replaced by those facts.

What must hold: a write that fails says so on one line (exit 2) and leaves no temporary file; a user's null
section or odd top level is no traceback; the written config names the same files as the user's wherever it
lands; a user's file keeps its mode and its symlink; the generations it suggests read back as the strings the
config accepts; an empty FILE is refused and ``-`` prints the config alone; a file that changes nothing does
not say the deployment fits.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpu_execution_pack import cli
from gpu_execution_pack.config import Config, ConfigError, config_from_mapping, load_config, relative_to
from gpu_execution_pack.doctor import advice, checks, probe
from gpu_execution_pack.output import write_all

# dcgm-exporter names of two generations: FB_FREE is published by 3.3 and 4.8, the PCIe rate by 4.10 alone, so
# the fleet is read by generations 4.8 and 4.10, the pair YAML turns into the floats 4.8 and 4.1 unquoted.
TWO_GENERATIONS = frozenset({"DCGM_FI_DEV_FB_FREE", "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND"})
MANY_CPUS = 128  # hosts this big make doctor ask for node.cpu_rate_interval


def deployment(names: frozenset[str] = TWO_GENERATIONS, cpus: int = 0) -> probe.Deployment:
    """The facts of a deployment with dcgm-exporter's ``names``, no rules loaded, hosts of ``cpus`` CPUs."""
    return probe.Deployment(
        metric_names=names,
        groups=(),
        targets=(),
        retention="",
        cluster_values={},
        gpus=0,
        attributed_gpus=0,
        collisions=(),
        max_cpus_per_host=cpus,
    )


def leftovers(folder: Path) -> list[Path]:
    """Temporary files write_all stages (``.<name>.<random>.tmp``) still in ``folder``."""
    return sorted(p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp"))


def umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def doctor(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run ``gpu-execution-pack doctor ARGS`` in-process against ``facts`` instead of a Prometheus: the exit
    code, standard output and standard error."""

    def run(*args: str, facts: probe.Deployment | None = None) -> tuple[int, str, str]:
        def ask(_args: Any, _work: Any, _then: Any = None, cfg: Any = None) -> probe.Deployment:
            assert facts is not None, "Prometheus was asked, and the command should have stopped before"
            return facts

        monkeypatch.setattr(cli, "ask_prometheus", ask)
        code = cli.main(["doctor", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def one_error_line(err: str) -> str:
    """The single line of ``err``, which must be an error and no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# --- 1. A write that fails: one line, exit 2, nothing left behind --------------------------------------------


def test_writing_over_a_folder_fails_and_leaves_no_temporary_file(tmp_path: Path):
    folder = tmp_path / "isdir"
    folder.mkdir()
    with pytest.raises(IsADirectoryError):
        write_all({folder: "a: 1\n"})
    assert folder.is_dir() and not any(folder.iterdir())
    assert leftovers(tmp_path) == []


def test_a_file_in_place_of_the_folder_is_reported_as_not_a_folder(tmp_path: Path):
    (tmp_path / "afile").write_text("mine\n")
    with pytest.raises(NotADirectoryError):
        write_all({tmp_path / "afile" / "x.yml": "a: 1\n"})
    assert (tmp_path / "afile").read_text() == "mine\n"
    assert leftovers(tmp_path) == []


def test_a_failing_rename_leaves_no_temporary_file_and_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    old = tmp_path / "a.yml"
    old.write_text("old\n")

    def refuse(*_: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError):
        write_all({old: "new\n", tmp_path / "b.yml": "b\n"})
    assert old.read_text() == "old\n" and not (tmp_path / "b.yml").exists()
    assert leftovers(tmp_path) == []


def test_a_failure_while_staging_the_second_file_removes_the_first_ones_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    chmod, calls = os.chmod, []

    def second_fails(path: Any, mode: int) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        chmod(path, mode)

    monkeypatch.setattr(os, "chmod", second_fails)
    with pytest.raises(OSError, match="No space left"):
        write_all({tmp_path / "a.yml": "a\n", tmp_path / "b.yml": "b\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_folder_among_the_targets_stops_every_write(tmp_path: Path):
    (tmp_path / "isdir").mkdir()
    with pytest.raises(IsADirectoryError):
        write_all({tmp_path / "a.yml": "a\n", tmp_path / "isdir": "b\n"})
    assert not (tmp_path / "a.yml").exists()  # all or nothing: the first is not written either
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("make", "name", "reason"),
    [
        (lambda root: (root / "isdir").mkdir(), "isdir", "Is a directory"),
        (lambda root: (root / "afile").write_text("x\n"), "afile/x.yml", "Not a directory"),
    ],
)
def test_doctor_says_on_one_line_why_it_cannot_write(tmp_path: Path, doctor, make, name: str, reason: str):
    make(tmp_path)
    target = tmp_path / name
    code, out, err = doctor("--write-config", str(target), facts=deployment(cpus=MANY_CPUS))
    assert code == 2
    assert one_error_line(err) == f"error: --write-config: cannot write {target}: {reason}"
    assert "doctor:" in out  # the checklist came first, as before
    assert leftovers(tmp_path) == []
    assert not target.is_dir() or not any(target.iterdir())


# --- 2. A null section, a top level that is no mapping -------------------------------------------------------


def test_a_null_section_is_filled_like_an_empty_one():
    user = yaml.safe_load("node:\n  # nothing set yet\nvendors: [nvidia]\n")
    assert user["node"] is None
    text = advice.suggested_config(user, config_from_mapping(user), deployment(cpus=MANY_CPUS))
    written = yaml.safe_load(text)
    assert written["node"]["cpu_rate_interval"] == advice.CPU_RATE_INTERVAL
    assert config_from_mapping(written).node.cpu_rate_interval == advice.CPU_RATE_INTERVAL


def test_a_null_section_in_the_users_file_end_to_end(tmp_path: Path, doctor):
    config = tmp_path / "pack.yml"
    config.write_text("node:\n  # nothing set yet\n")
    written = tmp_path / "new.yml"
    code, _, err = doctor("-c", str(config), "--write-config", str(written), facts=deployment(cpus=MANY_CPUS))
    assert code in (0, 1) and "Traceback" not in err, err
    assert load_config(written).node.cpu_rate_interval == advice.CPU_RATE_INTERVAL


@pytest.mark.parametrize("top", [["vendors"], "vendors", 3])
def test_a_top_level_that_is_no_mapping_is_a_config_error(top: Any):
    with pytest.raises(ConfigError, match="top level: expected a mapping"):
        advice.suggested_config(top, Config(), deployment())


def test_a_list_for_a_config_file_is_one_line_and_writes_nothing(tmp_path: Path, doctor):
    config = tmp_path / "pack.yml"
    config.write_text("- vendors\n")
    written = tmp_path / "new.yml"
    code, _, err = doctor("-c", str(config), "--write-config", str(written), facts=deployment())
    assert code == 2 and str(config) in one_error_line(err)
    assert not written.exists() and leftovers(tmp_path) == []


# --- 3. Relative paths name the same files from the written file's folder ------------------------------------


def string_keys(obj: Any, prefix: str = "") -> list[str]:
    """The dotted names of every text key of config section ``obj``, nested sections included."""
    keys = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            keys += string_keys(value, f"{prefix}{f.name}.")
        elif isinstance(value, str):
            keys.append(prefix + f.name)
    return keys


def replaced(obj: Any, dotted: str, value: str) -> Any:
    head, _, rest = dotted.partition(".")
    return dataclasses.replace(obj, **{head: replaced(getattr(obj, head), rest, value) if rest else value})


def value_of(obj: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        obj = getattr(obj, name)
    return obj


def folder_relative_keys() -> set[str]:
    """The keys load_config reads from the config file's folder: those whose relative value config.relative_to
    changes when the folder is another one."""
    found = set()
    for dotted in string_keys(Config()):
        try:
            cfg = replaced(Config(), dotted, "p")
        except (ConfigError, ValueError):  # a section that checks the key's text itself: a selector, a regex
            continue
        if value_of(relative_to(cfg, Path("/elsewhere")), dotted) != "p":
            found.add(dotted)
    return found


def test_every_key_the_loader_reads_from_the_config_folder_is_rewritten():
    assert folder_relative_keys() == set(advice.FOLDER_RELATIVE_KEYS)


def resolved(cfg: Config) -> dict[str, str]:
    """Each folder-relative key's value as a full path (load_config leaves some relative to the working folder)."""
    out = {}
    for dotted in advice.FOLDER_RELATIVE_KEYS:
        section, key = dotted.split(".")
        value = getattr(getattr(cfg, section), key)
        out[dotted] = os.path.abspath(value) if value else value
    return out


USER_PATHS = (
    "output:\n  rules_dir: ../prom/rules\n  dashboards_dir: {absolute}\n  docs_dir: docs\napi:\n  keys_file: keys.txt\n"
)


@pytest.mark.parametrize("where", ["sub/deeper/new.yml", "new.yml", "../outside/new.yml"])
def test_the_written_config_names_the_same_files_as_the_users(tmp_path: Path, where: str):
    config = tmp_path / "ops" / "config" / "pack.yml"
    config.parent.mkdir(parents=True)
    config.write_text(USER_PATHS.format(absolute=tmp_path / "grafana"))
    written = (config.parent / where).resolve()
    user = yaml.safe_load(config.read_text())
    text = advice.suggested_config(
        user, load_config(config), deployment(), read_from=config.parent, written_to=written.parent
    )
    write_all({written: text})
    assert resolved(load_config(written)) == resolved(load_config(config))
    assert yaml.safe_load(text)["output"]["dashboards_dir"] == str(tmp_path / "grafana")  # absolute: kept as is


def test_doctor_rewrites_the_paths_for_the_folder_it_writes_to(tmp_path: Path, doctor):
    config = tmp_path / "ops" / "pack.yml"
    config.parent.mkdir()
    config.write_text(USER_PATHS.format(absolute=tmp_path / "grafana"))
    written = tmp_path / "suggested" / "pack.yml"
    code, _, err = doctor("-c", str(config), "--write-config", str(written), facts=deployment())
    assert code in (0, 1), err
    assert resolved(load_config(written)) == resolved(load_config(config))


def test_printed_to_standard_output_the_paths_are_those_of_the_working_folder(
    tmp_path: Path, doctor, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "ops" / "pack.yml"
    config.parent.mkdir()
    config.write_text(USER_PATHS.format(absolute=tmp_path / "grafana"))
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    code, out, _ = doctor("-c", str(config), "--write-config", "-", facts=deployment())
    assert code in (0, 1)
    (here / "pack.yml").write_text(out)  # as `> pack.yml` would
    assert resolved(load_config(here / "pack.yml")) == resolved(load_config(config))


# --- 4. A user's file keeps its mode and its symlink; generated files keep theirs ----------------------------


def linked(real: Path, text: str, mode: int, link: Path) -> tuple[Path, Path]:
    """A file of ``text`` at ``real`` (its folder made) with ``mode``, and a symlink to it at ``link``."""
    real.parent.mkdir()
    real.write_text(text)
    real.chmod(mode)
    link.symlink_to(real)
    return real, link


def test_an_existing_file_keeps_its_mode(tmp_path: Path):
    target = tmp_path / "pack.yml"
    target.write_text("archive: {url: 'postgresql://u:secret@db/x'}\n")
    target.chmod(0o600)
    write_all({target: "changed: 1\n"}, keep_existing=True)
    assert target.read_text() == "changed: 1\n" and mode_of(target) == 0o600


def test_a_symlink_is_written_through_not_replaced(tmp_path: Path):
    real, link = linked(tmp_path / "real" / "pack.yml", "old\n", 0o640, tmp_path / "pack.yml")
    assert write_all({link: "new\n"}, keep_existing=True) == [link]
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert real.read_text() == "new\n" and mode_of(real) == 0o640
    assert leftovers(tmp_path) == [] and leftovers(real.parent) == []


def test_a_loop_of_links_is_an_os_error(tmp_path: Path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OSError):
        write_all({tmp_path / "a": "x\n"}, keep_existing=True)
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


def test_a_new_file_gets_the_mode_asked_for(tmp_path: Path):
    write_all({tmp_path / "new.yml": "a\n"}, mode=0o600, keep_existing=True)
    assert mode_of(tmp_path / "new.yml") == 0o600


def test_generated_files_stay_readable_by_everyone_the_umask_allows(tmp_path: Path):
    existing = tmp_path / "old.rules.yml"
    existing.write_text("old\n")
    existing.chmod(0o600)
    write_all({tmp_path / "new.rules.yml": "a\n", existing: "b\n"})
    expected = 0o666 & ~umask()
    assert mode_of(tmp_path / "new.rules.yml") == expected and mode_of(existing) == expected


def test_doctor_writes_a_new_file_with_the_mode_of_the_users_config(tmp_path: Path, doctor):
    config = tmp_path / "pack.yml"
    config.write_text("archive: {url: 'postgresql://u:secret@db/x'}\n")
    config.chmod(0o600)
    written = tmp_path / "new.yml"
    code, _, err = doctor("-c", str(config), "--write-config", str(written), facts=deployment())
    assert code in (0, 1), err
    assert mode_of(written) == 0o600


def test_doctor_writing_over_its_own_config_through_a_link_keeps_both(tmp_path: Path, doctor):
    real, link = linked(tmp_path / "secrets" / "pack.yml", "vendors: [nvidia]\n", 0o600, tmp_path / "pack.yml")
    code, _, err = doctor("-c", str(link), "--write-config", str(link), facts=deployment(cpus=MANY_CPUS))
    assert code in (0, 1), err
    assert link.is_symlink() and mode_of(real) == 0o600
    assert load_config(link).node.cpu_rate_interval == advice.CPU_RATE_INTERVAL


@pytest.mark.parametrize("through_link", [False, True])
def test_doctor_refuses_to_write_over_a_config_with_comments(tmp_path: Path, doctor, through_link: bool):
    # The written config keeps the user's keys, not their comments: the reasons an ops repo wrote down.
    text = "# pinned by hand: the old racks' exporter\ndcgm: {generations: ['4.8']}\n"
    if through_link:
        real, config = linked(tmp_path / "secrets" / "pack.yml", text, 0o600, tmp_path / "pack.yml")
    else:
        real = config = tmp_path / "pack.yml"
        config.write_text(text)
    code, out, err = doctor("-c", str(config), "--write-config", str(config))  # no facts: Prometheus is not asked
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: --write-config: {config} is the config given with -c") and "comments" in line
    assert real.read_text() == text


# --- 5. dcgm generations read back as the strings the config accepts -----------------------------------------


def test_the_written_generations_read_back_as_written():
    found = checks.generations_found(TWO_GENERATIONS)
    assert any(g.endswith("0") for g in found)  # a name a float would lose a digit of (4.10)
    text = advice.suggested_config({}, Config(), deployment())
    assert config_from_mapping(yaml.safe_load(text)).dcgm.generations == found


@pytest.mark.parametrize("pinned", [("4.9",), ("3.3", "4.8", "4.9", "4.10")])
def test_the_generations_fix_is_yaml_the_config_accepts(pinned: tuple[str, ...]):
    cfg = config_from_mapping({"dcgm": {"generations": list(pinned)}})
    item = checks.check_generations(cfg, deployment())
    assert item.status in ("warn", "fail"), item
    key, value = yaml.safe_load(item.fix.removeprefix("set ").split(" (")[0]).popitem()
    assert key == "dcgm.generations"
    assert config_from_mapping({"dcgm": {"generations": value}}).dcgm.generations == checks.generations_found(
        TWO_GENERATIONS
    )


# --- 6. An empty FILE is refused; - prints the config alone --------------------------------------------------


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_file_name_is_refused_before_prometheus_is_asked(empty: str, doctor, tmp_path: Path):
    code, out, err = doctor("--write-config", empty)  # no facts: asking Prometheus fails the test
    assert code == 2 and out == ""
    assert "--write-config" in one_error_line(err) and "empty" in err


def test_a_dash_prints_the_config_alone_and_the_checklist_to_standard_error(
    doctor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    code, out, err = doctor("--write-config", "-", facts=deployment(cpus=MANY_CPUS))
    assert code in (0, 1)
    data = yaml.safe_load(out)  # standard output is the config, nothing else
    assert out.startswith("# Written by gpu-execution-pack doctor")
    assert config_from_mapping(data).node.cpu_rate_interval == advice.CPU_RATE_INTERVAL
    assert "gpu-execution-pack doctor:" in err and "dcgm generations" in err
    assert list(tmp_path.iterdir()) == []  # no file named -


def test_a_dash_with_json_is_refused(doctor):
    code, out, err = doctor("--json", "--write-config", "-")
    assert code == 2 and out == ""
    assert "--json" in one_error_line(err)


# --- 7. A file that changes nothing does not say the deployment fits -----------------------------------------


def changed_lines(text: str) -> str:
    """The header's lines that say what changed (between `Changed:` and the saving it describes)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("Changed:"))
    return "\n".join(line for line in lines[start + 1 :] if line.startswith("#   "))


def test_nothing_changed_with_fails_in_the_checklist_does_not_read_as_fitting():
    matching = {"vendors": ["nvidia"], "dcgm": {"generations": ["4.8", "4.10"]}}
    text = advice.suggested_config(matching, config_from_mapping(matching), deployment(), fails=2)
    said = changed_lines(text)
    assert said.startswith("#   nothing") and "fits" not in said and "2 fails" in said, said


def test_nothing_changed_without_fails_claims_nothing_more():
    matching = {"vendors": ["nvidia"], "dcgm": {"generations": ["4.8", "4.10"]}}
    said = changed_lines(advice.suggested_config(matching, config_from_mapping(matching), deployment()))
    assert said.startswith("#   nothing") and "fits" not in said and "fail" not in said, said


def test_doctor_with_a_failing_checklist_and_no_change_names_the_fails(tmp_path: Path, doctor):
    config = tmp_path / "pack.yml"
    config.write_text("vendors: [nvidia]\ndcgm: {generations: ['4.8', '4.10']}\n")
    written = tmp_path / "new.yml"
    code, out, _ = doctor("-c", str(config), "--write-config", str(written), facts=deployment())
    assert code == 1 and "FAIL" in out  # no rule group loaded
    said = changed_lines(written.read_text())
    assert "fits" not in said and "fail" in said, said


def test_a_fifo_or_device_is_never_replaced_nor_read_to_its_end(tmp_path: Path, doctor):
    """Renaming onto /dev/null would replace the device with a file, and reading /dev/zero or a FIFO before
    comparing never ends: a target that is no regular file is refused, left as it was."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        write_all({fifo: "a\n"}, keep_existing=True)
    code, _, err = doctor("--write-config", str(fifo), facts=deployment())
    assert code == 2 and one_error_line(err).startswith(f"error: --write-config: cannot write {fifo}: not a regular")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and leftovers(tmp_path) == []


def test_a_config_read_from_a_pipe_keeps_its_keys(tmp_path: Path, doctor):
    """-c /dev/stdin (or a FIFO) can be read once: the written config keeps the keys it had."""
    fifo = tmp_path / "pack.yml"
    os.mkfifo(fifo)
    text = "rule_interval: 30s\nalerts: {runbook_url: https://rb}\n"
    # A daemon: were doctor never to open the FIFO, the writer blocked in open() must not hold the worker at exit.
    writer = threading.Thread(target=fifo.write_text, args=(text,), daemon=True)
    writer.start()
    written = tmp_path / "out" / "advised.yml"
    code, _, err = doctor("-c", str(fifo), "--write-config", str(written), facts=deployment())
    writer.join(timeout=10)
    assert code in (0, 1), err
    data = yaml.safe_load(written.read_text())
    assert data["rule_interval"] == "30s" and data["alerts"]["runbook_url"] == "https://rb", data


def test_the_prometheus_doctor_read_is_written_and_a_password_is_not(tmp_path: Path, doctor):
    """The written config's header says to run `doctor -c` on it: it names the --prometheus doctor read, unless
    that URL carries a password, which stays out of the file (and the line about it masks it)."""
    written = tmp_path / "advised.yml"
    doctor("--prometheus", "http://prom.example:9090", "--write-config", str(written), facts=deployment())
    assert load_config(written).api.prometheus_url == "http://prom.example:9090"
    url = "http://admin:s3cret@prom.example:9090"
    doctor("--prometheus", url, "--write-config", str(written), facts=deployment())
    text = written.read_text()
    assert "s3cret" not in text and "admin:***@prom.example:9090" in text
    assert load_config(written).api.prometheus_url == Config().api.prometheus_url


def test_a_value_the_config_would_refuse_is_left_out_and_said(tmp_path: Path, doctor):
    """A fleet scraped every 1000y (a compatible API's answer) asked for rate_window_fallback: 4000y, past the 292y
    any duration may be: doctor wrote a config it then refused to load. The key is left out, the file says why,
    and the rest of the advice is written; the file loads."""
    every = probe.Target("dcgm-exporter", {"job": "dcgm-exporter", "instance": "gpu-01:9400"}, 1000 * 365 * 86400.0)
    facts = dataclasses.replace(deployment(), targets=(every,), read_jobs=frozenset({"dcgm-exporter"}))
    written = tmp_path / "advised.yml"
    code, _, err = doctor("--write-config", str(written), facts=facts)
    assert code in (0, 1) and "Traceback" not in err, err
    text = written.read_text()
    cfg = load_config(written)  # the pack's own validation takes it
    assert cfg.rate_window_fallback == Config().rate_window_fallback
    assert "rate_window_fallback" not in yaml.safe_load(text)
    said = changed_lines(text)
    assert (
        "#   rate_window_fallback: not written, the config would refuse '4000y' (rate_window_fallback: '4000y' is "
        in (said)
    ), said
    assert "(at most 292y)); the slowest scrape the rules read is every 1000y (dcgm-exporter)" in said, said
    assert cfg.dcgm.generations == ("4.8", "4.10")  # the other advice is written
    # Nor does the checklist ask for a window the config refuses: the scrape is what to change.
    fix = next(i.fix for i in checks.checklist(Config(), facts) if i.check == "scrape intervals")
    assert fix == "scrape dcgm-exporter (gpu-01:9400) more often: rate_window_fallback is at most 292y", fix
