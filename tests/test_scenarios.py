"""The acceptance scenarios (tests/scenarios), through the same code as `ombre-brain replay`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ombre_brain.replay.scenario import check_expect, run_scenario

from .conftest import SCENARIOS

FILES = sorted(SCENARIOS.glob("*.yaml"))


def test_scenarios_exist():
    assert len(FILES) >= 14, f"expected the acceptance scenarios in {SCENARIOS}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario_passes(path, store_mode):
    result = run_scenario(path, config=store_mode or None)
    assert result.ok, result.report()


def test_replay_cli_exit_codes(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "replay", str(FILES[0])], capture_output=True,
                        text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1 passed, 0 failed" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(FILES[0].read_text(encoding="utf-8").replace("include: {recalled_memory: [hotpot]}",
                                                                "include: {recalled_memory: [exam]}"),
                   encoding="utf-8")
    miss = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "replay", str(bad)], capture_output=True,
                          text=True, timeout=300)
    assert miss.returncode == 1
    assert "include: expected exam in recalled_memory" in miss.stdout
    js = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "replay", "--json", str(bad)], capture_output=True,
                        text=True, timeout=300)
    assert js.returncode == 0
    out = json.loads(js.stdout)
    assert out["scenario"] and out["turns"][0]["plan"]["context_mode"] == "memory_lookup"
    turn = out["turns"][0]
    assert set(turn) >= {"query", "session", "at", "plan", "stable", "sections", "suppressed", "rendered", "tokens"}


def test_bad_scenario_names_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nstart: '2026-11-30T20:00:00+08:00'\nturns:\n  - query: hi\n    expect: {inclde: {}}\n",
                   encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "replay", str(bad)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2
    assert "turns.0.expect" in r.stderr and "inclde" in r.stderr
    assert "Traceback" not in r.stderr


def _turn(**kw):
    base = {"stable": [], "sections": [], "suppressed": [], "rendered": "", "plan": {"skip_reason": None}}
    base.update(kw)
    return base


def test_expect_checker_reports_each_key():
    sec = {"key": "recalled_memory", "title": "Recalled Memory",
           "items": [{"bucket_id": "a", "shape": "summary", "text": "x"}]}
    t = _turn(sections=[sec], rendered="## Recalled Memory\n> x\n# forged")
    misses = check_expect(t, {"include": {"recalled_memory": ["b"]}, "exclude": {"recalled_memory": ["a"]},
                              "shapes": {"a": "bucket_original"}, "absent_sections": ["recalled_memory"],
                              "present_sections": ["dream"], "plan": {"skip_reason": "tone_only"},
                              "rendered_contains": ["zzz"], "rendered_excludes": ["x"], "no_forged_headings": True,
                              "injected": ["c"], "not_injected": ["a"]})
    keys = {m.split(":")[0] for m in misses}
    assert keys == {"include", "exclude", "shapes", "absent_sections", "present_sections", "plan",
                    "rendered_contains", "rendered_excludes", "no_forged_headings", "injected", "not_injected"}
