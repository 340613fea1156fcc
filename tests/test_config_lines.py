"""A config mistake names its line: `config check` and the playground point at where the bad key is written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ombre_brain import ConfigError, load_config
from ombre_brain.config.lines import key_lines, line_of

TEXT = """# a persona
identity:
  ai_name: Haven

gateway:
  cooldown_hours: 3
  budgets:
    total: 900
layers:
  dynamic_memory: {direct_seed: content}
cues:
  tone_only: [想你, 抱抱]
"""


def test_every_key_has_its_line():
    lines = key_lines(TEXT)
    assert lines["identity"] == 2 and lines["identity.ai_name"] == 3
    assert lines["gateway.budgets.total"] == 8
    assert lines["layers.dynamic_memory.direct_seed"] == 10  # flow mappings keep their line
    assert lines["cues.tone_only.1"] == 12
    assert line_of(TEXT, "gateway.budgets.recalled_memory") == 7  # not written: its deepest written parent
    assert line_of(TEXT, "retrieval.max_direct") is None
    assert key_lines("gateway: [1, 2\n") == {}


@pytest.mark.parametrize("text,line,key", [
    ("identity:\n  ai_name: Haven\ngateway:\n  skip_recent_rounds: -1\n", 4, "gateway.skip_recent_rounds"),
    ("gateway:\n  budgets:\n    total: lots\n", 3, "gateway.budgets.total"),
    ("\n\ngateway:\n  cooldown_hourz: 3\n", 4, "gateway.cooldown_hourz"),
    ("diffusion:\n  max_hops: 2\n  hop_decay: [0.5]\n", 3, "diffusion.hop_decay"),
])
def test_a_mistake_in_a_file_names_file_line_and_key(tmp_path, text, line, key):
    f = tmp_path / "persona.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    assert exc.value.line == line and exc.value.key == key
    assert exc.value.message.startswith(f"{f}: line {line}: key '{key}': ")
    assert exc.value.problem in exc.value.message


def test_a_syntax_error_has_its_line_and_a_mapping_has_none(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("gateway:\n  budgets: {total: 5\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    assert exc.value.line == 3 and "invalid YAML at line 3" in exc.value.message
    with pytest.raises(ConfigError) as exc:
        load_config({"gateway": {"skip_recent_rounds": -1}})
    assert exc.value.line is None and exc.value.message.startswith("<overrides>: key 'gateway.skip_recent_rounds'")


def test_config_check_prints_the_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("# tuned for a quiet persona\ngateway:\n  skip_recent_rounds: -1\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "config", "check", str(f)], capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert f"{f}: line 3: key 'gateway.skip_recent_rounds': expected a value between 0 and" in r.stderr
