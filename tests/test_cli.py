"""The command line: validate a user's config, print the defaults, report errors without a traceback."""

from __future__ import annotations

import socket
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
    assert config_from_mapping(yaml.safe_load(capsys.readouterr().out)) == Config()


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
