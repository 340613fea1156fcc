"""The debug pages in a real browser: headless Debian Chromium driven by Playwright.

Each page is loaded from a real server over the demo persona, a query is run through the
page's own form, and the expected bucket must show with its gate reason. Every page must
make no request beyond this server and log no console error (a CSP violation is one).
A screenshot of each page lands in the test's temp dir.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from .conftest import LiveServer

pytestmark = pytest.mark.browser

SPACE = "haven:xiaoyu"
XSS_SPACE = "haven:xss"
QUERY = "外婆住院的时候"
TOKEN = "page-secret"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EVIL_TITLE = "<script>window.__pwned=1</script>花生酱事件"
EVIL_BODY = ('她说 <img src=x onerror="window.__pwned=2"> 花生酱 <b>不要</b>。\n'
             "### comment\n</td></tr><script>window.__pwned=3</script>")


def _chromium() -> str | None:
    for candidate in (os.environ.get("OMBRE_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = _chromium()
    if exe is None:
        pytest.skip("Debian's chromium was not found (install it with `make browser` or "
                    "`apt-get install -y chromium`); the debug-page browser tests need it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed in this venv")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=exe, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1480, "height": 1000}, locale="en-US")
        ctx.set_default_timeout(60_000)
        yield ctx
        ctx.close()


@pytest.fixture(scope="module")
def site(demo_brain):
    """The demo persona served for real, with one recorded turn and a space full of hostile text."""
    s = LiveServer(demo_brain)
    evil = demo_brain.write(space=XSS_SPACE, title=EVIL_TITLE, body=EVIL_BODY, tags=["花生酱"], importance=7)
    other = demo_brain.write(space=XSS_SPACE, title="<svg onload=window.__pwned=4>花生", body="花生 <i>x</i>")
    demo_brain.link(XSS_SPACE, evil, other, "same_event", 0.9)
    for space, session, q in ((SPACE, "pages", QUERY), (XSS_SPACE, "xss", "花生酱事件")):
        r = httpx.post(f"{s.url}/v1/inject", json={"space": space, "session_id": session, "query": q}, timeout=60)
        assert r.status_code == 200, r.text
    s.evil_id = evil
    yield s
    s.close()


@pytest.fixture(scope="module")
def locked(demo_brain):
    s = LiveServer(demo_brain, env_tokens={"OMBRE_TOKEN": TOKEN})
    yield s
    s.close()


@pytest.fixture
def page(browser, site, locked):
    """A fresh tab that records every request, console error and page error."""
    pg = browser.new_page()
    pg.requests, pg.errors = [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("console", lambda m: pg.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(f"pageerror: {e}"))
    yield pg
    own = (site.url, locked.url)
    foreign = [u for u in pg.requests if not u.startswith(own) and not u.startswith(("data:", "about:"))]
    pg.close()
    assert not foreign, f"the page reached beyond this server: {foreign}"
    assert not pg.errors, pg.errors


def expect():
    from playwright.sync_api import expect as _expect

    return _expect


def shot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path


def search(page, query: str) -> None:
    page.fill("input.q", query)
    page.click("form.query button[type=submit]")
    page.wait_for_load_state("load")


def test_recall_page_explains_each_candidate(page, site, tmp_path):
    e = expect()
    page.goto(f"{site.url}/debug/?space={SPACE}")
    search(page, QUERY)
    hospital = page.locator('[data-bucket-row="grandma_hospital"]')
    e(hospital).to_contain_text("injected")
    e(hospital).to_contain_text("admitted_reader_answers")  # the reader read the pair (design §25)
    e(hospital).to_contain_text("reader 0.")
    e(hospital.locator('.gate.allowed[data-gate="direct_seed"]')).to_be_visible()
    feel = page.locator('[data-bucket-row="feel_hospital"]')
    e(feel).to_contain_text("layer_never_direct")
    e(feel.locator('.gate.refused[data-gate="direct_seed"]')).to_contain_text("layer_never_direct")
    e(feel.locator("svg.bar")).to_have_count(3)
    e(page.locator("#rendered")).to_contain_text("外婆")
    e(page.locator("#rendered")).to_contain_text("## Recalled Memory")
    shot(page, tmp_path, "recall")
    page.fill('input[data-filter="#cands"]', "feel_hospital")  # the little JS runs under the CSP
    e(hospital).to_be_hidden()
    e(feel).to_be_visible()


def test_bucket_page_shows_fields_moments_edges_and_injections(page, site, tmp_path):
    e = expect()
    page.goto(f"{site.url}/debug/?space={SPACE}&q={QUERY}")
    page.locator('[data-bucket-row="grandma_hospital"] a[data-bucket="grandma_hospital"]').click()
    page.wait_for_load_state("load")
    assert "/debug/buckets/grandma_hospital" in page.url
    e(page.locator("h1")).to_contain_text("外婆住院了")
    e(page.locator("#moments tbody tr").first).to_be_visible()
    e(page.locator("#moments")).to_contain_text("grandma_hospital#")
    e(page.locator("main")).to_contain_text("context_of")
    e(page.locator("main")).to_contain_text(QUERY)  # the recorded turn of session "pages"
    search(page, QUERY)
    e(page.locator(".card").first).to_contain_text("admitted_reader_answers")
    e(page.locator("#moments")).to_contain_text("returned")
    shot(page, tmp_path, "bucket")


def test_diffusion_page_draws_paths_and_refusals(page, site, tmp_path):
    e = expect()
    page.goto(f"{site.url}/debug/diffusion?space={SPACE}")
    search(page, QUERY)
    e(page.locator('#graph g.node.seed[data-node="grandma_hospital"]')).to_be_visible()
    e(page.locator('#graph g.node.taken[data-node="grandma_recovered"]')).to_be_visible()
    e(page.locator('#graph g.node.refused[data-node="feel_hospital"]')).to_be_visible()
    assert page.locator("#graph g.edge.on-path").count() >= 2
    refused = page.locator('#targets [data-bucket-row="feel_hospital"]')
    e(refused).to_contain_text("refused")
    e(refused).to_contain_text("layer_never_diffused")
    e(page.locator('#targets [data-bucket-row="grandma_recovered"]')).to_contain_text("old_version")
    shot(page, tmp_path, "diffusion")


def test_surfacing_page_lists_every_bucket(page, site, demo_brain, tmp_path):
    e = expect()
    page.goto(f"{site.url}/debug/breath?space={SPACE}")
    search(page, QUERY)
    e(page.locator("#breath tbody tr")).to_have_count(demo_brain.store.count(SPACE))
    e(page.locator('[data-bucket-row="grandma_hospital"]')).to_contain_text("yes")
    e(page.locator('[data-bucket-row="feel_hospital"]')).to_contain_text("layer_never_direct")
    e(page.locator("#breath")).to_contain_text("not_a_candidate")
    shot(page, tmp_path, "breath")


def test_injection_log_page_shows_recorded_turns(page, site, tmp_path):
    e = expect()
    page.goto(f"{site.url}/debug/injections?space={SPACE}")
    page.locator('nav.sessions a[data-session="pages"]').click()
    page.wait_for_load_state("load")
    turn = page.locator("article.turn").first
    e(turn).to_contain_text(QUERY)
    e(turn.locator('a[data-bucket="grandma_hospital"]').first).to_be_visible()
    e(turn.locator("table.timings")).to_contain_text("candidates")
    e(turn).to_contain_text("layer_never_direct")
    shot(page, tmp_path, "injections")


def test_layer_policy_page(page, site, tmp_path):
    e = expect()
    page.goto(f"{site.url}/debug/layers?space={SPACE}")
    e(page.locator("#layers tbody tr")).to_have_count(12)  # the nine layers, then letter, plan and self_model
    e(page.locator('#layers tr[data-layer="dynamic_memory"]')).to_contain_text("skip_recent_rounds")
    e(page.locator('#layers tr[data-layer="relationship_weather"]')).to_contain_text("never")
    e(page.locator('#layers tr[data-layer="letter"]')).to_contain_text("never")
    shot(page, tmp_path, "layers")


def test_memory_text_is_shown_not_run(page, site, tmp_path):
    e = expect()
    title, body = "<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=2">'
    for path, needle in ((f"/debug/?space={XSS_SPACE}&q=花生酱事件", title),
                         (f"/debug/buckets/{site.evil_id}?space={XSS_SPACE}", title),
                         (f"/debug/diffusion?space={XSS_SPACE}&q=花生酱事件", title[:14]),  # graph labels are short
                         (f"/debug/breath?space={XSS_SPACE}&q=花生酱事件", title),
                         (f"/debug/injections?space={XSS_SPACE}", body),
                         (f"/debug/buckets?space={XSS_SPACE}", title)):
        page.goto(site.url + path)
        e(page.locator("main")).to_contain_text(needle)
        assert page.evaluate("window.__pwned") is None, path
        assert page.locator("script").count() == 1, path  # only our own debug.js
        assert page.locator("main img, main i").count() == 0, path  # the body's tags stay text
        assert page.locator("main b", has_text="不要").count() == 0, path
    page.goto(f"{site.url}/debug/buckets/{site.evil_id}?space={XSS_SPACE}")
    e(page.locator("main")).to_contain_text('<img src=x onerror="window.__pwned=2">')
    e(page.locator("main")).to_contain_text("</td></tr><script>window.__pwned=3</script>")
    shot(page, tmp_path, "escaped")


def test_pages_need_the_token_and_carry_it(page, locked, tmp_path):
    e = expect()
    resp = page.goto(f"{locked.url}/debug/?space={SPACE}")
    assert resp.status == 401
    e(page.locator("main")).to_contain_text("token=")
    assert page.goto(f"{locked.url}/debug/layers?token=wrong").status == 401
    page.errors.clear()  # Chromium logs each expected 401 as a failed resource load
    assert page.goto(f"{locked.url}/debug/?space={SPACE}&token={TOKEN}").status == 200
    search(page, QUERY)
    assert f"token={TOKEN}" in page.url
    e(page.locator('[data-bucket-row="feel_hospital"]')).to_contain_text("layer_never_direct")
    with page.expect_navigation() as nav:
        page.locator('a[data-nav="diffusion"]').click()
    assert nav.value.status == 200 and f"token={TOKEN}" in page.url
    e(page.locator('#graph g.node.taken[data-node="grandma_recovered"]')).to_be_visible()
    with page.expect_navigation() as nav:
        page.locator('#graph g.node[data-node="grandma_recovered"] a').click()
    assert nav.value.status == 200 and "/debug/buckets/grandma_recovered" in page.url and f"token={TOKEN}" in page.url
    shot(page, tmp_path, "token")


def test_profile_page_says_why_each_line_is_in_or_out(page, site, demo_brain, tmp_path):
    e = expect()
    space = "haven:profile-page"
    for bid, text, when in (("old_job", "我在阿里上班，做运营", "2026-01-02T10:00:00+08:00"),
                            ("new_job", "我跳槽了，现在在一家游戏公司上班", "2026-05-02T10:00:00+08:00"),
                            ("dog", "我家狗叫可乐，柯基，五岁了", "2026-01-03T10:00:00+08:00")):
        demo_brain.write(space, id=bid, title=text[:8], body=text, created=when, memory_layer="stable_boundary",
                         memory_subject="user")
    page.goto(f"{site.url}/debug/profile?space={space}")
    e(page.locator("[data-profile-summary]")).to_contain_text("2 of 3 stable memories shown")
    old = page.locator('[data-profile-row="old_job"]')
    e(old).to_contain_text("profile_superseded")
    e(old).to_contain_text("superseded by")
    e(old.locator('a[data-bucket="new_job"]')).to_be_visible()
    e(page.locator('[data-profile-row="dog"]')).to_contain_text("yes")
    shot(page, tmp_path, "profile")
    search(page, "我家狗叫啥")
    e(page.locator('[data-profile-row="dog"]')).to_contain_text("in_recalled_memory")
    page.fill('input[data-filter="#profile"]', "游戏公司")
    e(old).to_be_hidden()
    e(page.locator('[data-profile-row="new_job"]')).to_be_visible()
