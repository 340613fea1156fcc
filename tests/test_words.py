"""Every code a person meets on the debug pages has words (ombre_brain/turn/words.py): each value the config
accepts for a layer policy field, each layer, context mode and direct shape, and each reason code of the gates."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from ombre_brain import load_config
from ombre_brain.config import CONTEXT_MODES, LAYER_NAMES, LayerPolicy
from ombre_brain.turn.gate_table import GATES
from ombre_brain.turn.render import DIRECT_SHAPES
from ombre_brain.turn.words import POLICY_WORDS, words


def _literal_values(field: str) -> tuple[str, ...]:
    hint = typing.get_type_hints(LayerPolicy)[field]
    return typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else ()


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(LayerPolicy)])
def test_every_policy_value_the_config_accepts_or_ships_has_words(field):
    shipped = {getattr(p, field) for p in load_config(None).layers.values()}
    values = {*_literal_values(field), *(v for v in shipped if v)}
    if field == "section":  # section keys are their own words (Recalled Memory, …)
        assert POLICY_WORDS["section"] == {}
        return
    missing = sorted(v for v in values if not words(v, field))
    assert not missing, f"layers.<layer>.{field}: no words for {missing} (add them to POLICY_WORDS)"


def test_the_literal_fields_are_read_from_the_config():
    assert "careful_source" in _literal_values("diffusion") and "explicit_or_interval" in _literal_values("direct_seed")


def test_layers_modes_shapes_and_reasons_have_words():
    assert not [n for n in LAYER_NAMES if not words(n, "layer")]
    assert not [m for m in CONTEXT_MODES if not words(m, "mode")]
    assert not [s for s in DIRECT_SHAPES if not words(s, "shape")]
    assert not [r for r in GATES.reasons if not words(r)]


def test_a_code_nobody_described_has_no_words():
    assert words("no_such_code") == "" and words(None) == "" and words("never", "no_such_field") == ""
    assert words("never", "direct_seed") != words("never", "diffusion")  # a value's words depend on its field
