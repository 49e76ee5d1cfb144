"""The command line: validate a user's config, print the defaults, report errors without a traceback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import cli
from gpu_execution_pack.config import Config, config_from_mapping


@pytest.mark.usefixtures("promtool_available")
def test_validate_checks_a_config_and_its_rules_without_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cfg = tmp_path / "pack.yml"
    cfg.write_text(f"attribution: {{mode: kubernetes}}\noutput: {{rules_dir: {tmp_path / 'out'}}}\n")
    assert cli.main(["validate", "--config", str(cfg)]) == 0
    assert "valid; 5 rule files pass promtool check rules" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_defaults_prints_a_config_that_loads_as_the_defaults(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["defaults"]) == 0
    out = capsys.readouterr().out
    assert config_from_mapping(yaml.safe_load(out)) == Config()
    # Whole numbers as a user writes them, not as the float fields hold them (250000.0).
    assert "  max_points: 250000\n" in out and "default_price_per_gpu_hour: 2\n" in out
    assert not re.search(r": -?[0-9]+\.0$", out, re.MULTILINE), out


def test_errors_are_one_line_on_stderr_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cfg = tmp_path / "pack.yml"
    cfg.write_text("rate_window: often\n")
    assert cli.main(["validate", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "rate_window: 'often' is not accepted" in err
    assert "Traceback" not in err


def test_serve_refuses_to_start_without_keys(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("GPU_PACK_API_KEYS", raising=False)
    assert cli.main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "api.keys_file" in err and "GPU_PACK_API_KEYS" in err and "--insecure-no-auth" in err


def test_report_refuses_an_id_and_since_together(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["report", "job-1", "--since", "1d"]) == 2
    assert capsys.readouterr().err == "error: give an EXECUTION_ID or --since DURATION, not both\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "1d", "--start", "2026-12-07T09:00:00Z"], "--start and --end narrow one execution's report"),
        (["--since", "1d", "--end", "2026-12-07T09:00:00Z"], "the fleet view (--since) takes neither"),
        (["job-1", "--top", "3"], "--top applies to the fleet view (--since), not to one execution's report"),
    ],
    ids=["since-start", "since-end", "id-top"],
)
def test_report_refuses_an_option_of_the_other_view_rather_than_ignore_it(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
):
    assert cli.main(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err


def test_an_unreachable_prometheus_is_named_in_words_with_the_setting_to_change(
    capsys: pytest.CaptureFixture[str],
):
    with socket.socket() as closed:  # a port bound but never listened on: connections to it are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        assert cli.main(["report", "job-1", "--prometheus", f"http://127.0.0.1:{port}"]) == 3
    err = capsys.readouterr().err
    refused = f"Prometheus is unreachable: connection refused at 127.0.0.1:{port}"
    assert err == f"error: {refused}; set --prometheus or api.prometheus_url\n"


@pytest.mark.parametrize(
    ("args", "config", "named"),
    [
        (["generate", "--output-dir", "{file}"], None, "--output-dir"),
        (["dashboards", "--output-dir", "{file}/dashboards"], None, "--output-dir"),
        (["docs", "--output-dir", "{file}"], None, "--output-dir"),
        (["generate"], "output: {{rules_dir: {file}/rules}}\n", "output.rules_dir"),
        (["test", "--build-dir", "{file}"], None, "--build-dir"),
        (["test", "--build-dir", "{file}/suites"], None, "--build-dir"),
    ],
)
def test_an_output_place_that_cannot_be_written_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], config: str | None, named: str
):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("mine")
    argv = [a.format(file=in_the_way) for a in args]
    if config is not None:
        (tmp_path / "pack.yml").write_text(config.format(file=in_the_way))
        argv += ["--config", str(tmp_path / "pack.yml")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {named}: cannot write {in_the_way}") and err.endswith(": Not a directory\n"), err
    assert err.count("\n") == 1 and in_the_way.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a-file", *(["pack.yml"] if config else [])])


def test_output_to_a_reader_that_went_away_ends_quietly(tmp_path: Path):
    """`gpu-execution-pack ... | head`: the rest is not an error, and no traceback; the status a shell gives a
    process that SIGPIPE ended."""
    import subprocess
    import sys

    script = "import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1)\n"
    script += "from gpu_execution_pack.cli import main; sys.exit(main(['defaults']))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr) == (141, "")


def test_serve_names_the_port_out_of_range_or_taken(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("GPU_PACK_API_KEYS", "abcdefghijklmnopqrstu:research")
    assert cli.main(["serve", "--port", "99999"]) == 2
    assert capsys.readouterr().err == "error: --port: 99999 is not accepted; accepted: 0 (a free port) to 65535\n"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["serve", "--host", "127.0.0.1", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --host/--port: cannot listen on 127.0.0.1:{port}: Address already in use\n", err


def test_test_refuses_a_rules_dir_that_is_no_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    missing = tmp_path / "nonexistent-rules"
    assert cli.main(["test", "--rules-dir", str(missing), "--build-dir", str(tmp_path / "build")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --rules-dir: {missing} is not a folder; give the folder holding tests/*.test.yml\n"
    assert not (tmp_path / "build").exists()  # refused before any suite is built


@pytest.mark.parametrize(
    "command",
    [["query", "job-1"], ["report", "job-1"], ["report", "--since", "1d"], ["doctor"], ["serve"], ["archive"]],
    ids=lambda c: " ".join(c),
)
def test_a_command_needing_the_api_extra_says_so_and_how_to_install_it(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """An ops repo that installed the pack without extras (orjson absent: an import of it fails, as it does
    there): one line naming the command, the extra, what is missing and how to add it; no traceback."""
    monkeypatch.setitem(sys.modules, "orjson", None)
    assert cli.main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"gpu-execution-pack {command[0]} needs the pack's api extra (orjson not installed)" in err, err
    assert "'gpu-execution-pack[api] @ git+https://" in err and "pip install '.[api]'" in err, err


@pytest.mark.usefixtures("promtool_available")
@pytest.mark.parametrize("option", ["--prometheus-port", "--api-port"])
def test_the_demo_refuses_a_port_another_server_answers_on_before_it_loads_anything(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Else, on the API's port, another server's /healthz passed for the endpoint's: a ready line and commands
    that reached the wrong process."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["demo", "--dir", str(tmp_path / "demo"), option, str(port)]) != 0
    err = capsys.readouterr().err
    assert f"{option}: 127.0.0.1:{port} is taken: another server answers there" in err, err
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe" + b"k" * 20 + b" research\n", "is not UTF-8 text"),
        # The later tenant would win unseen: here it widens the key from one tenant to all.
        (b"aaaaaaaaaaaaaaaaaaaa research\naaaaaaaaaaaaaaaaaaaa *\n", "entry 2: its key is given on entry 1 already"),
    ],
    ids=["not-utf8", "duplicate-key"],
)
def test_serve_refuses_a_keys_file_it_cannot_read_as_written_on_one_line(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    keys = tmp_path / "keys.txt"
    keys.write_bytes(content)
    config = tmp_path / "pack.yml"
    config.write_text(f"api: {{keys_file: {keys}}}\n")
    assert cli.main(["serve", "--config", str(config), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


def test_a_keys_file_an_editor_began_with_a_byte_order_mark_keeps_its_first_key(tmp_path: Path):
    from gpu_execution_pack.api import auth

    keys = tmp_path / "keys.txt"
    keys.write_bytes("\ufeffaaaaaaaaaaaaaaaaaaaa research\n".encode())
    assert auth.load_keys(str(keys)) == {"aaaaaaaaaaaaaaaaaaaa": "research"}


@pytest.mark.parametrize("command", [["archive", "--since", "1d"], ["serve", "--port", "0"]])
def test_a_file_that_is_no_archive_is_named_on_one_line(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """archive.url naming a file that is no SQLite database: a traceback from SQLAlchemy before, and for serve one
    from the app's startup (with --workers, an exit 0)."""
    monkeypatch.setenv("GPU_PACK_API_KEYS", "abcdefghijklmnopqrstu:research")
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database\n")
    config = tmp_path / "pack.yml"
    config.write_text(f"archive: {{url: {junk}}}\n")
    assert cli.main([command[0], "--config", str(config), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err == f"error: archive.url: cannot open the archive '{junk}' (file is not a database)\n", err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_standard_output_on_a_full_disk_is_one_line_not_a_traceback():
    """`gpu-execution-pack defaults > pack.yml` on a full disk (/dev/full answers every write with ENOSPC)."""
    with open("/dev/full", "w") as full:
        run = subprocess.run(
            [sys.executable, "-m", "gpu_execution_pack", "defaults"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert run.returncode == 1
    assert run.stderr == "error: cannot write standard output: No space left on device\n", run.stderr


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["generate", "-o", ""], "--output-dir"),
        (["archive", "--url", ""], "--url"),
        (["report", "job-1", "--html", ""], "--html"),
        (["doctor", "--config", ""], "--config"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[0],
)
def test_an_empty_option_is_refused_not_read_as_left_out(
    argv: list[str], option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """`-o "$OUT"` with OUT unset wrote into the config's folder; `--url ""` archived into the default file."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == f"error: {option}: empty; give a value, or leave the option out for its default\n"
    assert list(tmp_path.iterdir()) == []


def test_archive_refuses_a_since_prometheus_would_refuse_naming_the_option(capsys: pytest.CaptureFixture[str]):
    """Past 292 years Prometheus refused the query, and the message blamed Prometheus (exit 3)."""
    assert cli.main(["archive", "--since", "300y"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "error: --since: '300y' is not accepted; accepted: a Prometheus duration above 0 and at most 292y"
    )


def test_an_archive_url_given_by_option_is_named_by_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`archive --url <a folder>` blamed archive.url, a key the user had not set, and named no path."""
    assert cli.main(["archive", "--since", "1d", "--url", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --url: cannot open the archive '{tmp_path}' (unable to open database file)\n", err


@pytest.mark.parametrize("interval", ["1ms", "999ms", "0s"])
def test_archive_refuses_a_follow_interval_under_a_second_before_it_opens_anything(
    interval: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """`archive --follow 1ms` ran its passes back to back: a busy loop on Prometheus and the database."""
    archive = tmp_path / "new.sqlite"
    # A URL of no Prometheus ends even a --follow run at its first pass: refused first, it is never read.
    assert cli.main(["archive", "--follow", interval, "--url", str(archive), "--prometheus", "ftp://nowhere"]) == 2
    assert capsys.readouterr().err == (
        f"error: --follow: {interval!r} is not accepted; accepted: a Prometheus duration of at least 1s and at most "
        "292y, e.g. 30d or 5m\n"
    )
    assert not archive.exists()


def test_an_archive_pass_that_fails_before_writing_leaves_no_new_sqlite_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """`archive --url new.sqlite` with Prometheus unreachable left a file holding the schema alone, which the next
    report took for an archive. The file it created goes; an archive that was there already stays."""
    from gpu_execution_pack.archive.store import Store

    with socket.socket() as closed:  # a port bound but never listened on: connections to it are refused
        closed.bind(("127.0.0.1", 0))
        prometheus = f"http://127.0.0.1:{closed.getsockname()[1]}"
        new = tmp_path / "new.sqlite"
        assert cli.main(["archive", "--url", str(new), "--prometheus", prometheus]) == 3
        assert capsys.readouterr().err.startswith("error: Prometheus is unreachable: connection refused")
        assert sorted(p.name for p in tmp_path.iterdir()) == []
        kept = tmp_path / "kept.sqlite"
        opened = Store.open(str(kept))
        assert opened is not None
        opened.close()
        assert cli.main(["archive", "--url", str(kept), "--prometheus", prometheus]) == 3
        assert kept.exists()
