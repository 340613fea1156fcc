"""One reason table: every code the pipeline, admission, budget, dream gate and debug views emit is in it.

Two checks that fail differently: a walk over the source finds every literal reason code where
it is emitted (so a new code with no text fails before any turn runs it), and real turns over
the shared scenarios and the debug routes must only carry codes of the table.
"""

from __future__ import annotations

import ast
from html import escape as html_escape
from pathlib import Path

import pytest

from ombre_brain.recall_types import QueryPlan
from ombre_brain.turn import gates as G
from ombre_brain.turn.gate_table import GATES, REASONS, describe
from ombre_brain.turn.reasons import ADMISSION_REASONS

from .conftest import SCENARIOS

ROOT = Path(__file__).resolve().parents[1]
EMITTERS = ["turn", "dream", "retrieval", "debug_ui", "server"]


def _emitted_literals() -> dict[str, str]:
    """code -> where, for string literals in the places a reason code is emitted."""
    found: dict[str, str] = {}

    def note(node: ast.AST, path: Path) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.setdefault(node.value, f"{path.relative_to(ROOT)}:{node.lineno}")

    for wing in EMITTERS:
        for path in sorted((ROOT / "ombre_brain" / wing).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                name = ast.unparse(node.func).rsplit(".", 1)[-1]
                if name in ("GateResult", "Admission") and len(node.args) >= 2:
                    note(node.args[1], path)
                elif name == "decide" and len(node.args) >= 3:
                    note(node.args[2], path)
                elif name == "_record" and len(node.args) >= 3:
                    note(node.args[2], path)
                for kw in node.keywords:
                    if kw.arg == "reason":
                        note(kw.value, path)
    return found


def test_every_literal_reason_code_is_in_the_table():
    found = _emitted_literals()
    assert len(found) > 40, "the walk found too few codes: has the emitting code moved?"
    missing = {code: where for code, where in found.items() if code and code not in REASONS}
    assert not missing, f"codes without a text (turn/reasons.py, or a gate entry in turn/gate_table.py): {missing}"


def test_the_code_families_are_in_the_table():
    """Codes built at run time: skip_<reason> and admitted_<admission reason>."""
    for skip in ("empty", "tone_only", "skip_only", "vague"):
        r = G.direct_seed_gate(QueryPlan(skip_reason=skip), None, None, None, None)
        assert r.reason in REASONS
    admitting = [k for k in ADMISSION_REASONS if f"admitted_{k}" in REASONS]
    assert admitting, "no admission reason has an admitted_ form"


def test_precedence_names_every_gate_once():
    assert GATES.names == ("direct_seed", "topic_evidence", "recall_context", "related_target", "recent_context",
                           "anchor", "weather", "cooldown", "profile")


def test_every_code_has_human_text():
    for code, text in REASONS.items():
        assert text and text != code and "\n" not in text, code
    assert describe("budget_total").startswith("trimmed")
    assert describe(None) == ""


def _codes_in(obj, out: set[str]) -> set[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "reason" and isinstance(v, str):
                out.add(v)
            else:
                _codes_in(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _codes_in(v, out)
    return out


def test_real_turns_only_carry_codes_of_the_table():
    from ombre_brain.replay.scenario import run_scenario

    seen: set[str] = set()
    for path in sorted(SCENARIOS.glob("*.yaml")):
        result = run_scenario(path)
        _codes_in(result.to_dict(), seen)
    seen.discard("")
    assert len(seen) > 15
    assert not seen - set(REASONS), seen - set(REASONS)


@pytest.mark.parametrize("route", ["/api/recall-debug", "/api/breath-debug", "/api/diffusion-debug", "/api/moments"])
def test_debug_routes_only_carry_codes_of_the_table(demo_brain, route):
    from ombre_brain.server.app import create_app

    client = create_app(demo_brain).test_client()
    r = client.get(route, query_string={"space": "haven:xiaoyu", "q": "还记得我们去海边那次吗"})
    assert r.status_code == 200, r.get_json()
    seen = _codes_in(r.get_json(), set()) - {""}
    assert not seen - set(REASONS), seen - set(REASONS)


def test_debug_pages_show_the_text_of_a_reason(demo_brain):
    from ombre_brain.server.app import create_app

    client = create_app(demo_brain).test_client()
    html = client.get("/debug/breath", query_string={"space": "haven:xiaoyu", "q": "还记得我们去海边那次吗"}
                      ).get_data(as_text=True)
    for code in ("not_a_candidate", "layer_never_direct"):  # shown as text (not only in a tooltip), code beside it
        assert f'<span class="reason-text">{html_escape(describe(code))}</span>' in html, code
