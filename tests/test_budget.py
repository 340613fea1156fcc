"""Token estimates and budgets: against a slow reference, and the budget properties."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ombre_brain.config import SECTION_KEYS, Budgets
from ombre_brain.recall_types import Item, SectionOut
from ombre_brain.turn.budget import STABLE_SECTIONS, apply_budgets, estimate_tokens, truncate_to_tokens

ORDER = ("recent_context", "context_mode", "recalled_memory", "diffused_memory", "persona_state",
         "relationship_weather", "favorite_memory", "dream")
DIRECT = ("bucket_original", "bucket_window", "bucket_capsule")


# ---------------------------------------------------------------- estimate


@pytest.mark.parametrize("text,tokens", [
    ("", 0),
    ("   \n", 0),
    ("你好", 2),
    ("你好，世界。", 6),                 # fullwidth punctuation counts like a character
    ("ひらがな한국", 6),
    ("hello", 2),                        # ceil(1.3)
    ("hello world again", 4),            # ceil(3.9)
    ("one two three four five six seven eight nine ten", 13),
    ("2026-11-30", 5),                   # three digit groups, two symbol runs
    ("3.5 km", 3),
    ("小雨 said hi!", 2 + 3 + 1),
])
def test_estimate_tokens(text, tokens):
    assert estimate_tokens(text) == tokens


def test_truncate_to_tokens():
    text = "第一句话很长很长。第二句话也很长很长。"
    cut = truncate_to_tokens(text, 10)
    assert cut is not None and cut.endswith("…") and estimate_tokens(cut) <= 10
    assert text.startswith(cut[:-1])
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, 0) is None


# ---------------------------------------------------------------- specific rules


def item(bid, text, shape="summary", rank=0.5, moment=None):
    extra = {"moment_text": moment} if moment is not None else {}
    return Item(bid, None, shape, text, "dynamic_memory", None, None, rank_score=rank, extra=extra)


def test_a_direct_hit_larger_than_its_budget_is_cut_to_its_moment():
    big = item("trip", "长" * 500, "bucket_window", 1.0, moment="双廊看日出的那个早上")
    out, records = apply_budgets([SectionOut("recalled_memory", "Recalled Memory", (big,))],
                                 Budgets(recalled_memory=100), order=ORDER)
    (kept,) = out[0].items
    assert kept.text == "双廊看日出的那个早上" and kept.shape == "bucket_window"
    assert records == [{"bucket_id": "trip", "section": "recalled_memory", "reason": "budget_cut_to_moment",
                        "tokens": 500 - 10}]


def test_a_moment_still_too_large_is_truncated_with_an_ellipsis():
    big = item("trip", "长" * 500, "bucket_original", 1.0, moment="短" * 300)
    out, records = apply_budgets([SectionOut("recalled_memory", "R", (big,))], Budgets(recalled_memory=100),
                                 order=ORDER)
    (kept,) = out[0].items
    assert kept.text == "短" * 99 + "…" and kept.extra["budget_cut"] == "truncated"
    assert records[0]["reason"] == "budget_cut_to_moment"


def test_lowest_ranked_items_go_first():
    sec = SectionOut("diffused_memory", "D", (item("a", "字" * 100, rank=0.9), item("b", "字" * 100, rank=0.2),
                                              item("c", "字" * 100, rank=0.5)))
    out, records = apply_budgets([sec], Budgets(diffused_memory=220), order=ORDER)
    assert [i.bucket_id for i in out[0].items] == ["a", "c"]
    assert records == [{"bucket_id": "b", "section": "diffused_memory", "reason": "budget_section", "tokens": 100}]


def test_zero_budget_turns_a_section_off_and_stable_sections_do_not_count():
    core = SectionOut("core_memory", "Core Memory", (item("c", "规则"),))
    facts = SectionOut("facts", "Facts", (item("f", "事" * 50),))
    rec = SectionOut("recalled_memory", "R", (item("r", "忆" * 50, "bucket_original"),))
    out, records = apply_budgets([core, facts, rec], Budgets(total=60), order=ORDER)
    assert [s.key for s in out] == ["facts", "recalled_memory"]
    assert records == [{"bucket_id": "c", "section": "core_memory", "reason": "budget_section", "tokens": 2}]


def test_the_total_trims_from_the_end_of_the_order():
    secs = [SectionOut("dream", "Dream", (item("d", "梦" * 40),)),
            SectionOut("recalled_memory", "R", (item("r", "忆" * 50, "bucket_original"),)),
            SectionOut("relationship_weather", "W", (item("w", "天" * 40),))]
    out, records = apply_budgets(secs, Budgets(total=100), order=ORDER)
    assert [s.key for s in out] == ["recalled_memory", "relationship_weather"]
    assert records == [{"bucket_id": "d", "section": "dream", "reason": "budget_total", "tokens": 40}]


# ---------------------------------------------------------------- slow reference


def slow_apply(sections, budgets, order):
    """The docstring, read literally, recomputing every sum from scratch."""
    records = []

    def cost(it):
        return estimate_tokens(it.text)

    def settle(items, limit, key, reason):
        ranked = sorted(enumerate(items), key=lambda p: (-p[1].rank_score, p[0]))
        kept = {}
        for pos, it in ranked:
            used = sum(cost(k) for k in kept.values())
            if used + cost(it) <= limit:
                kept[pos] = it
                continue
            if it.shape in DIRECT:
                m = it.extra.get("moment_text")
                if m and m.strip() and used + estimate_tokens(m) <= limit:
                    kept[pos] = dataclasses.replace(it, text=m, extra={**it.extra, "budget_cut": "moment"})
                    records.append({"bucket_id": it.bucket_id, "section": key, "reason": "budget_cut_to_moment",
                                    "tokens": cost(it) - estimate_tokens(m)})
                    continue
                if not kept:
                    base = m if m and m.strip() else it.text
                    best = None
                    for n in range(len(base) + 1):  # every prefix; keep the longest that fits
                        cand = base[:n].rstrip() + "…"
                        if estimate_tokens(cand) <= limit - used and cand.strip("…").strip():
                            best = cand
                    if base and estimate_tokens(base) <= limit - used:
                        best = base
                    if best is not None:
                        kept[pos] = dataclasses.replace(it, text=best, extra={**it.extra, "budget_cut": "truncated"})
                        records.append({"bucket_id": it.bucket_id, "section": key,
                                        "reason": "budget_cut_to_moment", "tokens": cost(it) - estimate_tokens(best)})
                        continue
            records.append({"bucket_id": it.bucket_id, "section": key, "reason": reason, "tokens": cost(it)})
        return [kept[p] for p in sorted(kept)]

    after = []
    for sec in sections:
        limit = getattr(budgets, sec.key, None)
        after.append(list(sec.items) if limit is None else settle(list(sec.items), limit, sec.key, "budget_section"))
    dyn = [i for i, s in enumerate(sections) if s.key not in STABLE_SECTIONS]
    dyn.sort(key=lambda i: (list(order).index(sections[i].key) if sections[i].key in order else len(order), i))
    for i in dyn:
        spent = sum(cost(it) for j in dyn if dyn.index(j) < dyn.index(i) for it in after[j])
        after[i] = settle(after[i], budgets.total - spent, sections[i].key, "budget_total")
    out = [dataclasses.replace(s, items=tuple(after[i])) for i, s in enumerate(sections) if after[i]]
    return out, records


WORDS = ["小雨", "火锅", "海边", "的", "。", "，", "hello", "memory", "42", "!!", " ", "\n", "下雨天散步", "ok"]


def random_sections(rng: random.Random) -> list[SectionOut]:
    keys = rng.sample(list(SECTION_KEYS) + ["custom"], rng.randint(0, 6))
    secs = []
    for key in keys:
        its = []
        for n in range(rng.randint(0, 5)):
            text = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 60)))
            shape = rng.choice(DIRECT + ("summary", "note"))
            moment = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 15))) if rng.random() < 0.6 else None
            rank = rng.choice([0.1, 0.5, 0.5, round(rng.random(), 2)])
            its.append(item(f"{key}-{n}", text, shape, rank, moment))
        secs.append(SectionOut(key, key.title(), tuple(its)))
    return secs


def random_budgets(rng: random.Random) -> Budgets:
    return Budgets(**{f.name: rng.choice([0, 5, 20, 40, 80, 200]) for f in dataclasses.fields(Budgets)})


@pytest.mark.parametrize("seed", range(300))
def test_apply_budgets_matches_the_slow_reference(seed):
    rng = random.Random(seed)
    secs, budgets = random_sections(rng), random_budgets(rng)
    assert apply_budgets(secs, budgets, order=ORDER) == slow_apply(secs, budgets, ORDER)


# ---------------------------------------------------------------- properties

texts = st.lists(st.sampled_from(list("小雨火锅海边。， ab1!\n") + ["hello ", "42 "]), max_size=80).map("".join)
items_st = st.lists(st.builds(item, st.just("x"), texts, st.sampled_from(DIRECT + ("summary", "note")),
                              st.floats(0, 1), st.none() | texts), max_size=5)
budgets_st = st.builds(Budgets, **{f.name: st.integers(0, 150) for f in dataclasses.fields(Budgets)})


@settings(max_examples=300, database=None, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SECTION_KEYS), items_st), max_size=8, unique_by=lambda t: t[0]),
       budgets_st)
def test_every_section_and_the_dynamic_total_fit(raw, budgets):
    secs = [SectionOut(k, k, tuple(its)) for k, its in raw]
    out, records = apply_budgets(secs, budgets, order=ORDER)
    total = 0
    for sec in out:
        used = sum(estimate_tokens(i.text) for i in sec.items)
        assert used <= getattr(budgets, sec.key)
        if sec.key not in STABLE_SECTIONS:
            total += used
    assert total <= budgets.total
    assert all(r["reason"] in ("budget_section", "budget_total", "budget_cut_to_moment") for r in records)
    assert all(r["tokens"] >= 0 for r in records)
    # A direct hit alone in a section with room for its moment is never dropped whole.
    for k, its in raw:
        limit = getattr(budgets, k)
        if len(its) == 1 and its[0].shape in DIRECT and (k in STABLE_SECTIONS) and limit >= 4 \
                and its[0].text.strip():
            assert any(s.key == k for s in out)
