"""Issue 50, a playground draft cannot take the server down (N9, N10, N11, N12 and the error names).

A draft is YAML from the network. Nine levels of nine aliases ("billion laughs", 300 bytes) used to be
walked by the line-numbering step until the server ran out of memory; now a draft's alias is refused with
its line before anything walks it. A cue list of 30,000 words used to cost tens of seconds of compiling
(each cue's normalising looked the cue sets up again, hashing every list: quadratic), inside the first
replayed turn where no cancel could reach it; now the cue lists hold at most ``MAX_CUES`` and compile
once, before the first turn. A 5,000-digit integer was a 500; a save name with a trailing newline was
a file name. Every POST of the playground takes only ``application/json``, so a form another site makes a
browser send is refused even with no token configured (the demo). All through the real app on waitress.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from ombre_brain import Brain

from .conftest import LiveServer

SPACE = "haven:limits"
T0 = datetime(2026, 3, 1, 20, 0, tzinfo=timezone.utc)
STAR = "limits-star-token"
MAX_CUES = 2000  # ombre_brain.config.MAX_CUES, checked below


def bomb(levels: int, width: int = 9) -> str:
    """Billion laughs in a persona's cue lists: each list holds ``width`` aliases of the one before."""
    names = ["tone_only", "skip_only", "explicit_recent", "just_now", "explicit_old", "conflict", "repair",
             "memory_lookup", "favorite_request", "detail_request", "intimate", "playful"]
    lines = ["cues:", f"  {names[0]}: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"  {names[i]}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def many_cues(n: int, key: str = "memory_lookup") -> str:
    """A draft whose one cue list holds ``n`` distinct five-letter words (30,000 fit under the draft's size cap)."""
    words, i = [], 0
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    while len(words) < n:
        j, w = i, ""
        for _ in range(5):
            w += alphabet[j % 26]
            j //= 26
        words.append(w)
        i += 1
    return f"# a persona draft\ncues:\n  {key}: [{', '.join(words)}]\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A server with no token (anyone on the machine, and any page a browser opens, may reach it)."""
    root = tmp_path_factory.mktemp("draft-limits")
    brain = Brain.open(root / "data", {"server": {"playground": {"save_dir": str(root / "personas")}}})
    for i in range(3):
        brain.write(space=SPACE, title=f"海边的第{i}个傍晚", body=f"我们在海边捡贝壳，第{i}次。")
    for i in range(30):
        brain.turn(SPACE, "chat", f"你还记得海边的第{i % 3}个傍晚吗", now=T0 + timedelta(minutes=i))
    live = LiveServer(brain)
    live.root = root
    yield live
    live.close()
    brain.close()


@pytest.fixture(scope="module")
def starred(site):
    """The same store behind a token for every space (saving takes one)."""
    live = LiveServer(site.brain, env_tokens={"OMBRE_TOKEN": STAR})
    yield live
    live.close()


def post(site, path: str, body, **kw) -> httpx.Response:
    return httpx.post(f"{site.url}{path}", json=body, timeout=60, **kw)


def _wait(site, job_id: str, timeout: float = 120) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = httpx.get(f"{site.url}/api/playground/replay/{job_id}", params={"space": SPACE}, timeout=30).json()
        if job["state"] != "running":
            return job
        time.sleep(0.1)
    raise AssertionError(f"replay {job_id} still running after {timeout} s")


# ---------------------------------------------------------------- N9: aliases


@pytest.mark.parametrize("levels", [3, 9])
def test_a_draft_alias_is_refused_with_its_line_on_every_route(site, levels):
    text = bomb(levels)
    assert len(text.encode()) < 600  # a few hundred bytes
    r = post(site, "/api/playground/check", {"space": SPACE, "policy": text})
    assert r.status_code == 200 and r.json()["ok"] is False, r.text
    err = r.json()["error"]
    assert (err["code"], err["line"]) == ("bad_config", 3), err
    assert "alias *a0" in err["problem"], err
    for path in ("/api/playground/overlay", "/api/playground/replay", f"/debug/playground/overlay?space={SPACE}"):
        r = post(site, path, {"space": SPACE, "policy": text})
        assert r.status_code == 400, (path, r.status_code, r.text[:300])
        if path.startswith("/api/"):
            assert r.json()["error"]["line"] == 3 and "alias" in r.json()["error"]["message"]
        else:
            assert "line 3" in r.text and "alias" in r.text
    # the server is still itself: a plain draft checks in the same process
    ok = post(site, "/api/playground/check", {"space": SPACE, "policy": "gateway: {skip_recent_rounds: 2}\n"})
    assert ok.json() == {**ok.json(), "ok": True, "changed": ["gateway.skip_recent_rounds"]}


def test_yaml_nested_past_any_option_is_refused_with_its_line(site):
    text = "gateway:\n  x: " + "[" * 900 + "]" * 900 + "\n"
    r = post(site, "/api/playground/check", {"space": SPACE, "policy": text})
    assert r.status_code == 200 and r.json()["error"]["line"] == 2 and "deeper than" in r.json()["error"]["problem"]
    assert post(site, "/api/playground/replay", {"space": SPACE, "policy": text}).status_code == 400


# ---------------------------------------------------------------- cross-site form posts


FORM_ROUTES = ["/api/playground/check", "/api/playground/replay", "/api/playground/overlay",
               "/api/playground/save", f"/debug/playground/overlay?space={SPACE}"]


@pytest.mark.parametrize("path", FORM_ROUTES)
@pytest.mark.parametrize("form", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_form_another_site_could_post_is_refused_with_no_token_configured(site, path, form):
    """The three content types a cross-site form sends without a preflight; the body is what a page would craft."""
    body = f'{{"space": "{SPACE}", "policy": "gateway: {{skip_recent_rounds: 2}}", "name": "evil", "x": "'
    r = httpx.post(f"{site.url}{path}", content=(body + '"}').encode(), timeout=30,
                   headers={"Content-Type": form + ("; boundary=x" if form.startswith("multipart") else "")})
    assert r.status_code == 400, (path, form, r.status_code, r.text[:300])
    assert "application/json" in r.text
    assert not (site.root / "personas" / "evil.yaml").exists()


def test_a_form_post_starts_no_replay(site):
    before = httpx.post(f"{site.url}/api/playground/replay", timeout=30, headers={"Content-Type": "text/plain"},
                        content=f'{{"space": "{SPACE}", "policy": "{{}}"}}'.encode())
    assert before.status_code == 400
    r = post(site, "/api/playground/replay", {"space": SPACE, "policy": "{}", "last": 2})
    assert r.status_code == 202, r.text  # the slot is free: the form started nothing
    assert _wait(site, r.json()["id"])["state"] == "done"


# ---------------------------------------------------------------- N10: cue lists


def test_a_thirty_thousand_cue_draft_is_refused_naming_the_list_and_its_line(site):
    text = many_cues(30_000)
    assert len(text.encode()) < 256 * 1024  # under the draft's size cap: the count is what refuses it
    r = post(site, "/api/playground/check", {"space": SPACE, "policy": text})
    assert r.json()["ok"] is False, r.text
    err = r.json()["error"]
    assert (err["key"], err["line"]) == ("cues.memory_lookup", 3), err
    from ombre_brain import config

    assert config.MAX_CUES == MAX_CUES
    assert f"at most {MAX_CUES}" in err["problem"]
    r = post(site, "/api/playground/replay", {"space": SPACE, "policy": text})
    assert r.status_code == 400 and r.json()["error"]["key"] == "cues.memory_lookup"


@pytest.mark.parametrize("cue,problem", [("a*b*c*d", "3 wildcards"), ("x" * 101, "101 characters")])
def test_a_cue_that_could_backtrack_or_sprawl_is_refused(site, cue, problem):
    r = post(site, "/api/playground/check", {"space": SPACE, "policy": f"cues:\n  memory_lookup: [ok, '{cue}']\n"})
    err = r.json()["error"]
    assert (err["key"], err["line"]) == ("cues.memory_lookup.1", 2) and problem in err["problem"], err


def test_cue_lists_compile_in_one_pass_not_one_lookup_per_cue(monkeypatch):
    """Compiling N cues looks the cue sets up a handful of times, not N times (each lookup hashes every list)."""
    from ombre_brain import cues as cue_module
    from ombre_brain.config import load_config
    from ombre_brain.recall_policy import RecallPolicy

    cfg = load_config({"cues": {"memory_lookup": [f"word{i:04d}" for i in range(1600)]}})
    calls = []
    real = cue_module.collapse_sets
    monkeypatch.setattr(cue_module, "collapse_sets", lambda c: calls.append(1) or real(c))
    RecallPolicy(cfg, tokenizer=lambda t, s=None: t.split()).plan_query("你还记得吗")  # compiles, then plans
    assert len(calls) <= 25, len(calls)


def test_a_draft_at_the_cap_replays_and_a_cancel_stops_it_before_the_next_run(site):
    text = many_cues(MAX_CUES - 400)
    r = post(site, "/api/playground/check", {"space": SPACE, "policy": text})
    assert r.json()["ok"] is True, r.text
    r = post(site, "/api/playground/replay", {"space": SPACE, "policy": text, "last": 30})
    assert r.status_code == 202, r.text
    job = r.json()
    cancel = httpx.delete(f"{site.url}/api/playground/replay/{job['id']}", params={"space": SPACE}, timeout=30)
    assert cancel.status_code == 200
    done = _wait(site, job["id"])
    assert done["state"] == "cancelled" and done["done"] < 30 and "result" not in done, done


# ---------------------------------------------------------------- N11, N12 and the names of things


def test_a_five_thousand_digit_number_in_a_draft_is_named_not_a_500(site):
    for literal in ("9" * 5000, "-" + "9" * 5000, "0x" + "f" * 5000, "1." + "0" * 5000):
        text = f"gateway:\n  skip_recent_rounds: {literal}\n"
        r = post(site, "/api/playground/check", {"space": SPACE, "policy": text})
        assert r.status_code == 200 and r.json()["ok"] is False, (literal[:8], r.status_code, r.text[:200])
        assert r.json()["error"]["line"] == 2 and "at most 40" in r.json()["error"]["problem"]
        for path in ("/api/playground/overlay", "/api/playground/replay"):
            r = post(site, path, {"space": SPACE, "policy": text})
            assert r.status_code == 400 and r.json()["error"]["code"] == "bad_config", (path, r.text[:200])


def test_a_non_finite_number_in_a_draft_is_refused(site):
    r = post(site, "/api/playground/check", {"space": SPACE, "policy": "gateway:\n  cooldown_hours: .nan\n"})
    err = r.json()["error"]
    assert (err["key"], err["line"]) == ("gateway.cooldown_hours", 2) and "finite" in err["problem"], err


@pytest.mark.parametrize("name", ["x\n", "x\r", "quiet\n.yaml", "x\u2028"])
def test_a_save_name_with_a_line_break_is_refused(starred, name):
    root = starred.brain.config.server.playground.save_dir
    r = post(starred, "/api/playground/save", {"space": SPACE, "policy": "{}", "name": name},
             headers={"Authorization": f"Bearer {STAR}"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("name:"), r.text
    from pathlib import Path
    assert not any("\n" in p.name or "\r" in p.name for p in Path(root).glob("*")) if Path(root).exists() else True


def test_a_draft_under_another_field_name_is_told_the_field_it_wants(site):
    for path in ("/api/playground/replay", "/api/playground/check", "/api/playground/overlay"):
        r = post(site, path, {"space": SPACE, "draft": "gateway: {skip_recent_rounds: 2}\n"})
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "unknown_field", (path, r.text)
        assert "draft" in err["message"] and "policy" in err["message"], err
    r = post(site, "/api/playground/replay", {"space": SPACE})
    assert r.status_code == 400 and "field policy" in r.json()["error"]["message"]
