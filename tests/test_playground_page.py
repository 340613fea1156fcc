"""The policy playground and the polished debug pages in real headless Chromium, at 1280 px.

A designer opens the playground on a seeded space with recorded turns, tries a draft that does not parse
(its line is named, nothing runs), shortens ``gateway.skip_recent_rounds`` and a budget, replays, reads
the changed turns with their reasons, downloads the overlay, and the overlay, loaded with ``--config``,
makes a real turn do what the playground said. Recall and Layer policy are checked at the same width: no
clipped column, every refusal with the number it missed, every policy code with its words.

Set ``OMBRE_SHOTS=docs/screenshots`` to write the pages' screenshots there (the README links them).
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.demo.seed import seed_persona
from ombre_brain.turn.budget import item_tokens

from .conftest import LiveServer
from .test_debug_pages import CHROMIUM_ARGS, _chromium
from .test_playground import CONFIG, QUERIES, SPACE, T0, record

pytestmark = pytest.mark.browser

WIDTH = 1280
CHANGED_AT = 2  # the third turn asks about the hospital again, two rounds after it showed: the cooldown holds it


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    exe = _chromium()
    if exe is None:
        pytest.skip("Debian's chromium was not found (install it with `make browser` or "
                    "`apt-get install -y chromium`); the debug-page browser tests need it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed in this venv")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-1280")), executable_path=exe, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": WIDTH, "height": 900}, locale="en-US", accept_downloads=True)
        ctx.set_default_timeout(120_000)
        yield ctx
        ctx.close()


@pytest.fixture
def tab(chromium):
    pg = chromium.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(f"pageerror: {e}"))
    yield pg
    pg.close()
    assert not pg.errors, pg.errors


def expect():
    from playwright.sync_api import expect as _expect

    return _expect


def shot(page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    if os.environ.get("OMBRE_SHOTS"):
        out = Path(os.environ["OMBRE_SHOTS"])
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / f"{name}-1280.png")


def _edit(text: str, **changes) -> str:
    """Change ``section.key: old`` lines of the editor's YAML, as a person would type them."""
    lines = text.splitlines()
    for dotted, value in changes.items():
        *path, key = dotted.split(".")
        depth, i = 0, 0
        for part in path:  # walk down to the key, one indentation level a part
            i = next(j for j in range(i, len(lines)) if lines[j] == "  " * depth + f"{part}:") + 1
            depth += 1
        j = next(j for j in range(i, len(lines)) if lines[j].startswith("  " * depth + f"{key}:"))
        lines[j] = "  " * depth + f"{key}: {value}"
    return "\n".join(lines) + "\n"


def _no_clipped_columns(page, table: str) -> None:
    """Every header cell of the table is inside the window and the table is not wider than its box."""
    box = page.evaluate("""(sel) => {
        const t = document.querySelector(sel), wrap = t.parentElement;
        return {table: t.scrollWidth, wrap: wrap.clientWidth, doc: document.documentElement.scrollWidth,
                right: Math.max(...[...t.querySelectorAll('th')].filter(th => th.offsetParent)
                                 .map(th => th.getBoundingClientRect().right))};
    }""", table)
    assert box["table"] <= box["wrap"] + 1, f"{table} is wider than its box: {box}"
    assert box["right"] <= WIDTH and box["doc"] <= WIDTH, f"{table} has a column outside the window: {box}"


def test_a_designer_replays_a_draft_downloads_it_and_a_real_turn_agrees(tab, tmp_path):
    e = expect()
    data = tmp_path / "data"
    brain = Brain.open(data, CONFIG)
    server = None
    try:
        seed_persona(brain)
        record(brain)
        server = LiveServer(brain)
        tab.goto(f"{server.url}/debug/playground?space={SPACE}")
        e(tab.locator("#log-note")).to_contain_text(f"{len(QUERIES)} can be replayed")
        serving = tab.input_value("#policy")

        # a draft that does not parse: its line is named, nothing starts, the serving policy keeps running
        broken = _edit(serving, **{"gateway.skip_recent_rounds": "[0"})
        tab.fill("#policy", broken)
        tab.click("#replay")
        e(tab.locator("#draft-error")).to_be_visible()
        e(tab.locator("#draft-error")).to_contain_text("invalid YAML")
        assert int(tab.get_attribute("#draft-error", "data-line")) >= broken.splitlines().index(
            "  skip_recent_rounds: [0") + 1
        bad = _edit(serving, **{"gateway.skip_recent_rounds": "-1"})
        tab.fill("#policy", bad)
        tab.click("#replay")
        want = bad.splitlines().index("  skip_recent_rounds: -1") + 1
        e(tab.locator("#draft-error")).to_contain_text(f"line {want}: gateway.skip_recent_rounds")
        e(tab.locator("#result")).to_be_hidden()
        assert brain.config.gateway.skip_recent_rounds == 5

        draft = _edit(serving, **{"gateway.skip_recent_rounds": 0, "gateway.budgets.recalled_memory": 260})
        tab.fill("#policy", draft)
        tab.click("#replay")
        e(tab.locator("#draft-ok")).to_contain_text(f"Replayed {len(QUERIES)} turns", timeout=300_000)
        e(tab.locator("#progress")).to_have_attribute("data-state", "done")
        e(tab.locator("#totals")).to_contain_text("gateway.skip_recent_rounds, gateway.budgets.recalled_memory")
        e(tab.locator('tr[data-total="memories newly injected"] td')).not_to_have_text("0")
        e(tab.locator('tr[data-total="tokens in Recalled Memory"]')).to_be_visible()
        changed_at = (T0 + timedelta(minutes=CHANGED_AT)).isoformat()
        row = tab.locator("#turns tbody tr.changed", has_text=changed_at)
        e(row).to_have_count(1)
        enters = row.locator('.change[data-kind="enters"][data-section="recalled_memory"]')
        e(enters.first).to_be_visible()
        e(row).to_contain_text("skipped_recent_rounds")  # the reason that changed, as a code ...
        e(row.locator(".reason-words").first).not_to_be_empty()  # ... and in words
        e(row.locator('.gate-change[data-gate="cooldown"]').first).to_be_visible()
        said = enters.evaluate_all("els => els.map(e => e.getAttribute('data-bucket'))")
        assert said, "the playground listed no memory entering the changed turn"
        _no_clipped_columns(tab, "#turns")
        shot(tab, tmp_path, "playground")

        with tab.expect_download() as dl:
            tab.click("#download")
        overlay = tmp_path / "persona.yaml"
        dl.value.save_as(str(overlay))
        text = overlay.read_text(encoding="utf-8")
        assert "skip_recent_rounds: 0" in text and "recalled_memory: 260" in text
        assert "vector_k" not in text  # only what differs from the defaults
    finally:
        if server is not None:
            server.close()
        brain.close()

    # load it as the server would (`ombre-brain serve --config FILE`) and run the changed turn for real
    from ombre_brain.cli.common import open_brain
    from ombre_brain.cli.parser import build_parser

    args = build_parser().parse_args(["serve", "--data", str(data), "--config", str(overlay)])
    with open_brain(args) as real:
        assert real.config.gateway.skip_recent_rounds == 0 and real.config.gateway.budgets.recalled_memory == 260
        history: list[dict] = []
        for i, q in enumerate(QUERIES[:CHANGED_AT + 1]):
            t = real.turn(SPACE, "after", q, now=T0 + timedelta(minutes=i), context=list(history))
            history += [{"role": "user", "content": q}, {"role": "assistant", "content": "嗯，我记得。"}]
        got = t.item_ids("recalled_memory")
        assert set(said) <= set(got), (said, got)
        assert sum(item_tokens(it) for it in t.section("recalled_memory").items) <= 260


@pytest.fixture(scope="module")
def demo_site(demo_brain):
    s = LiveServer(demo_brain)
    yield s
    s.close()


def test_recall_at_1280_fits_and_says_the_number_a_refusal_missed(tab, demo_site, tmp_path):
    e = expect()
    query = "do you remember the beach"
    data = httpx.get(f"{demo_site.url}/api/recall-debug", params={"space": SPACE, "q": query}, timeout=60).json()
    refused = [c for c in data["candidates"] if c["admission"].get("evidence") is not None
               and not c["admission"]["admitted"] and c["admission"].get("threshold") is not None]
    held = [c for c in data["candidates"] if c["runtime_gate"]["direct_seed"].get("allowed") is False
            and c["runtime_gate"]["direct_seed"].get("threshold") is not None]
    assert refused and held, "the demo persona has no weighed refusal for this question any more: pick another"

    def number(g: dict) -> str:
        label = {"admit": "", "admit_cjk": " CJK", "admit_cross_script": " cross-script", "reader": "",
                 "reader_unasked": " unasked"}[g["threshold_name"]]
        score = "reader" if g["threshold_name"].startswith("reader") else "evidence"  # the reader's probability
        return f"{score} {g['evidence']:.2f} < {g['threshold']:.2f}{label}"

    tab.goto(f"{demo_site.url}/debug/?space={SPACE}&q={query}")
    for c in refused:  # the admission verdict, with the threshold it was held against
        e(tab.locator(f'[data-bucket-row="{c["bucket_id"]}"] .evidence')).to_contain_text(number(c["admission"]))
    for c in held:  # and the gate that refused it, with the same number
        e(tab.locator(f'[data-bucket-row="{c["bucket_id"]}"] .gate-number[data-number="direct_seed"]')).to_have_text(
            number(c["runtime_gate"]["direct_seed"]))
    _no_clipped_columns(tab, "#cands")
    shot(tab, tmp_path, "recall")

    # a person who wants the moments wider hides the gates column; the choice outlives a reload
    tab.uncheck('[data-columns="#cands"] input[data-col="gates"]')
    e(tab.locator("#cands td.c-gates").first).to_be_hidden()
    tab.reload()
    e(tab.locator("#cands td.c-gates").first).to_be_hidden()
    tab.check('[data-columns="#cands"] input[data-col="gates"]')
    e(tab.locator("#cands td.c-gates").first).to_be_visible()


def test_layer_policy_at_1280_gives_every_code_its_words(tab, demo_site, tmp_path):
    from ombre_brain.turn.words import words

    e = expect()
    tab.goto(f"{demo_site.url}/debug/layers?space={SPACE}")
    cells = tab.locator("#layers td[data-field]")
    assert cells.count() >= 9 * 4
    for i in range(cells.count()):
        cell = cells.nth(i)
        code = cell.locator("code")
        if code.count() == 0:
            continue  # "—": the field does not apply to the layer
        field, value = cell.get_attribute("data-field"), code.inner_text()
        e(cell.locator(".code-words")).to_have_text(words(value, field))
        assert words(value, field), f"{field}: {value} has no words"
    e(tab.locator('#layers tr[data-layer="core_memory"] td[data-field="direct_seed"]')).to_contain_text(
        "never a direct hit: shown only as a line of the stable Core Memory section")
    _no_clipped_columns(tab, "#layers")
    shot(tab, tmp_path, "layers")
