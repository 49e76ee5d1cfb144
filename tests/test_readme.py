"""README.md's reference tables say what the code generates: every rule file's groups and every alert,
no more and no fewer. They are written by hand (each row says what a group or alert is for), so this
test is what keeps them from going stale when a group or an alert is added."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from gpu_execution_pack.build import rule_outputs
from gpu_execution_pack.config import Config

README = Path(__file__).resolve().parent.parent / "README.md"
# A table row whose first cells are code spans: | `a` | `b` | ... or | `a` | ...
ROW = re.compile(r"^\| `([^`]+)` \|(?: `([^`]+)` \|)?", re.MULTILINE)


def table_after(heading_row: str) -> list[tuple[str, str]]:
    """The code-span cells of the table whose header row is ``heading_row``, up to its first blank line."""
    text = README.read_text()
    start = text.index(heading_row)
    table = text[start : text.find("\n\n", start)]
    return [(m.group(1), m.group(2) or "") for m in ROW.finditer(table)]


def generated_rule_files() -> dict[str, dict]:
    """The default config's rule files (``*.rules.yml``), parsed, by file name."""
    return {
        path.name: yaml.safe_load(text)
        for path, text in rule_outputs(Config()).items()
        if path.name.endswith(".rules.yml") and path.parent == Path(Config().output.rules_dir)
    }


def test_the_file_table_lists_every_group_of_every_rule_file_in_order():
    generated = [
        (name, group["name"]) for name, rules in sorted(generated_rule_files().items()) for group in rules["groups"]
    ]
    listed = table_after("| file | group | series |")
    assert sorted(listed) == sorted(generated)
    assert len(listed) == len(set(listed))


def test_the_alert_table_lists_every_alert_the_default_config_generates():
    alerts = {
        rule["alert"]
        for rules in generated_rule_files().values()
        for group in rules["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    listed = [name for name, _ in table_after("| alert | fires when |")]
    assert sorted(listed) == sorted(alerts)
