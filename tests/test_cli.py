"""The command line: validate a user's config, print the defaults, report errors without a traceback."""

from __future__ import annotations

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
