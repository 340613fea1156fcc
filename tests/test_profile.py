"""The profile (design §24): who the user is and how to be with them, in every turn, within its own budget."""

from __future__ import annotations

from datetime import datetime

import pytest

from ombre_brain import Brain
from ombre_brain.config import load_config
from ombre_brain.errors import ConfigError
from ombre_brain.profile.book import Book, Entry
from ombre_brain.profile.frames import FrameReader, Line, supersessions
from ombre_brain.turn.gate_table import REASONS

SPACE = "haven:yu"
DAY1 = "2026-03-02T21:00:00+08:00"
DAY2 = "2026-03-20T21:00:00+08:00"
LATER = "2026-06-01T21:{:02d}:00+08:00"


def fact(brain, bid, text, when=DAY1, layer="stable_boundary", **extra):
    subject = "relationship" if layer == "relationship_lesson" else "user"
    return brain.write(SPACE, id=bid, title=text[:12], body=text, created=when, memory_layer=layer,
                       memory_subject=subject, **extra)


def profile_ids(turn) -> list[str]:
    sec = turn.section("profile")
    return [i.bucket_id for i in sec.items] if sec else []


def in_front(turn) -> list[str]:
    """The profile's lines and the lines it moved into Recalled Memory whole (the message is about them)."""
    return profile_ids(turn) + [b for b, where in turn.debug["profile"].moved.items() if where == "recalled_memory"
                                and b in turn.item_ids("recalled_memory")]


@pytest.fixture
def yu(tmp_path):
    with Brain.open(tmp_path / "data", {"identity": {"ai_name": "星星", "user_name": "阿柚"}}) as b:
        yield b


def test_the_dogs_name_in_a_later_session_and_two_turns_after_it_was_recalled(yu):
    fact(yu, "dog", "我家狗叫可乐，柯基，五岁了")
    fact(yu, "job", "我在杭州做UI设计")
    later = yu.turn(SPACE, "s2", "我家狗叫啥来着", DAY2)
    assert "dog" in in_front(later) and "可乐" in later.rendered
    assert "UNKNOWN" not in later.rendered
    first = yu.turn(SPACE, "s3", "What's my dog's name?", LATER.format(0))
    ctx = [{"role": "user", "content": "What's my dog's name?"}, {"role": "assistant", "content": "可乐!"}]
    yu.turn(SPACE, "s3", "ok and what's the weather like where you are", LATER.format(1), context=ctx)
    ctx += [{"role": "user", "content": "ok and what's the weather like where you are"},
            {"role": "assistant", "content": "Sunny in here."}]
    again = yu.turn(SPACE, "s3", "What's my dog's name?", LATER.format(2), context=ctx)
    assert "可乐" in first.rendered and "可乐" in again.rendered  # a cooldown never hides the answer
    assert "UNKNOWN" not in again.rendered


def test_an_allergy_is_in_front_of_the_model_when_dessert_comes_up(yu):
    fact(yu, "mango", "我对芒果过敏，吃一口嘴就肿")
    fact(yu, "sister", "我妹妹在成都读大学")
    turn = yu.turn(SPACE, "s", "同事说下午请大家吃芒果千层", DAY2)
    assert "mango" in in_front(turn) and "过敏" in turn.rendered
    quiet = yu.turn(SPACE, "s2", "今天好冷", DAY2)  # said nothing about it: still there, as its line
    line = next(i for i in quiet.section("profile").items if i.bucket_id == "mango")
    assert line.runtime_gate["profile"]["allowed"] is True and line.runtime_gate["section"] == "profile"


def test_a_changed_job_shows_only_the_new_one_and_the_old_stays_as_history(yu):
    fact(yu, "old_job", "我在阿里上班，做运营", when=DAY1)
    fact(yu, "new_job", "我跳槽了，现在在一家游戏公司做策划", when=DAY2)
    turn = yu.turn(SPACE, "s", "我最近有点累", LATER.format(0))
    assert "new_job" in profile_ids(turn) and "old_job" not in profile_ids(turn)
    view = turn.debug["profile"].to_dict()
    old = next(e for e in view["entries"] if e["id"] == "old_job")
    assert (old["reason"], old["superseded_by"]) == ("profile_superseded", "new_job")
    asked = yu.turn(SPACE, "s2", "我以前在哪家公司上班来着", LATER.format(5))
    shown = [i for s in asked.sections for i in s.items if i.bucket_id == "old_job"]
    assert not shown or all(i.extra.get("superseded_by") == "new_job" and i.text.startswith("(earlier")
                            for i in shown)


@pytest.mark.parametrize("old, new, ask, other", [
    ("我在星桥科技上班，做视觉设计", "我跳槽了，现在在云帆网络做用户研究", "我以前那家公司叫啥来着",
     "我妈以前在哪上班来着"),
    ("i work at a tiny game studio called Pixelmoor, QA tester", "i quit pixelmoor, i work at Halverson Maps now",
     "where did i work before this job, my new boss asked", "where did my sister work before"),
])
def test_a_question_about_an_old_value_shows_it_as_history(yu, old, new, ask, other):
    """"我以前那家公司叫啥来着" asks for the superseded line: the profile shows it marked as history (never as current,
    naming what replaced it) beside the current one, and says no UNKNOWN; a question about the present, or about
    another holder's past, shows no history."""
    fact(yu, "old", old, when=DAY1)
    fact(yu, "new", new, when=DAY2)
    asked = yu.turn(SPACE, "s", ask, LATER.format(0))
    items = {i.bucket_id: i for i in asked.section("profile").items}
    assert "new" in items and "old" in items
    assert items["old"].text.startswith("(earlier; since changed) ") and items["old"].extra["superseded_by"] == "new"
    view = {e["id"]: e for e in asked.debug["profile"].to_dict()["entries"]}
    assert view["old"]["reason"] == "profile_earlier" and view["old"]["allowed"]
    assert "UNKNOWN" not in asked.rendered
    assert "old" not in profile_ids(yu.turn(SPACE, "s2", "我今天好累", LATER.format(5)))
    assert "old" not in profile_ids(yu.turn(SPACE, "s3", other, LATER.format(10)))


def test_an_episode_superseded_is_never_shown_as_an_old_value(reader):
    """"where did i work before this job" asks for the old job's line; an event about the job search that a later
    line ended ("i have a phone screen monday at Halverson") states no old value and is not history."""
    cfg = load_config()

    def entry(bid, text, at, hint="stable_boundary"):
        return Entry(bid, hint, text, 10, at, at, 5, 0, reader.read(text, text.split(), {}))

    book = Book.build([entry("old", "i work at a game studio called Brightloop, QA tester", "2026-01-05"),
                       entry("screen", "i have a phone screen monday with a company called Halverson Maps",
                             "2026-06-01", hint="process_event"),
                       entry("new", "i got the job, i work at Halverson Maps now as QA lead", "2026-07-01")],
                      cfg.gateway.profile, linked={"old": "new", "screen": "new"})
    ask = "where did i work before this job"
    sel = book.select(cfg.gateway.profile, 1000, datetime.fromisoformat("2026-07-10T12:00:00+00:00"), {},
                      about=lambda: reader.read(ask, ask.split(), {}), history=True)
    assert sel.earlier == ["old"]


def test_a_purge_removes_a_line_at_once(yu):
    fact(yu, "dog", "我家狗叫可乐，柯基，五岁了")
    fact(yu, "city", "我住在杭州西湖区")
    assert "dog" in profile_ids(yu.turn(SPACE, "s", "嗯嗯", DAY2))
    yu.purge(SPACE, bucket_ids=["dog"])
    turn = yu.turn(SPACE, "s", "嗯嗯", DAY2)
    assert profile_ids(turn) == ["city"] and "可乐" not in turn.rendered


def test_dont_surface_sensitive_anchors_and_letters_never_appear(yu):
    fact(yu, "quiet", "我小时候被狗咬过，不想再提", dont_surface=True)
    fact(yu, "secret", "我在看心理医生", tags=["sensitive"])
    fact(yu, "coord", "我的生日是七月七号", anchor=True)
    fact(yu, "ok", "我在杭州做UI设计")
    yu.letters.write(SPACE, side="companion", content="给阿柚的信：你做UI设计真的很棒", lock_type="permanent")
    turn = yu.turn(SPACE, "s", "今天好累", DAY2)
    assert profile_ids(turn) == ["ok"]
    reasons = {e["id"]: e["reason"] for e in turn.debug["profile"].to_dict()["entries"]}
    assert reasons["quiet"] == "dont_surface" and reasons["secret"] == "sensitive_unasked"
    assert reasons["coord"] == "anchor_only_when_asked"
    assert "给阿柚的信" not in turn.rendered


def test_a_message_kept_as_a_fact_and_as_a_lesson_is_one_line(yu):
    said = "我叫林柚，叫我阿柚就好，别叫我全名，听着像在挨骂"
    fact(yu, "name_fact", said)
    fact(yu, "name_lesson", said, layer="relationship_lesson", dedupe=False)  # as the writer keeps both sides
    fact(yu, "city", "我住在杭州西湖区")
    turn = yu.turn(SPACE, "s", "今天好累", DAY2)
    assert profile_ids(turn).count("name_lesson") == 1 and "name_fact" not in profile_ids(turn)
    assert turn.rendered.count("别叫我全名") == 1
    twin = next(e for e in turn.debug["profile"].to_dict()["entries"] if e["id"] == "name_fact")
    assert (twin["reason"], twin["superseded_by"]) == ("profile_same_line", "name_lesson")
    assert "name_fact" in turn.debug["profile"].shown  # the gates keep its twin out of Recalled Memory too


def test_a_rule_guess_is_not_a_profile_line(yu):
    yu.write(SPACE, id="guess", title="习惯", body="我每天早上都喝一杯豆浆")  # no writer hint: the rule's cue words
    assert yu.get(SPACE, "guess").memory_classification_source == "rule"
    assert profile_ids(yu.turn(SPACE, "s", "早", DAY2)) == []


def test_a_lived_in_store_shows_the_lines_that_matter_now_within_the_budget(tmp_path):
    cfg = {"gateway": {"budgets": {"profile": 60, "profile_cjk": None}, "profile": {"max_lines": 5}}}
    with Brain.open(tmp_path / "data", cfg) as b:
        for i in range(30):
            b.write(SPACE, id=f"f{i}", title=f"习惯{i}", body=f"我每周{i % 7 + 1}去一次第{i}号健身房锻炼",
                    memory_layer="stable_boundary", memory_subject="user", created=DAY1)
        b.write(SPACE, id="parrot", title="鹦鹉", body="我家的鹦鹉叫阿绿，会说你好", memory_layer="stable_boundary",
                memory_subject="user", created=DAY1)
        turn = b.turn(SPACE, "s", "阿绿今天又学会一句话", DAY2)
        view = turn.debug["profile"].to_dict()
        assert view["chose"] and view["tokens"] <= 60 and len(profile_ids(turn)) <= 5
        assert "parrot" in in_front(turn)  # the turn's own search says what matters now
        other = b.turn(SPACE, "s2", "第17号健身房今天人好多", DAY2)
        assert "f17" in in_front(other)
        cut = [e for e in view["entries"] if e["reason"] == "profile_budget_cut"]
        assert cut and all(isinstance(e["score"], float) for e in cut)


@pytest.mark.parametrize("weights, shown", [({"holder": 2.0, "attribute": 2.0}, True), ({}, False)])
def test_a_lived_in_profile_shows_the_lines_about_whom_the_message_asks(weights, shown):
    """"what's my cat's name again" in a crowded store whose search missed the line that says it ("Mothball turned
    fifteen" shares no word with it): the space binds Mothball to the cat, so the message's frame and the line's meet
    (weights holder, attribute); with those weights at zero (the default) the line is cut for the budget like any
    other old one."""
    cfg = load_config({"gateway": {"profile": {"max_lines": 5, "weights": weights}}})
    pc = cfg.gateway.profile
    reader = FrameReader(pc)
    texts = {"cat": "Mothball turned fifteen yesterday, she still sleeps on my keyboard",
             **{f"f{i}": f"i swim at pool number {i} every week, lane {i % 7}" for i in range(30)}}
    names = dict(reader.bindings("and my cat Mothball"))
    entries = [Entry(bid, "stable_boundary", t, 12, DAY1 if bid == "cat" else DAY2, DAY1 if bid == "cat" else DAY2,
                     5, 0, reader.read(t, t.split(), names)) for bid, t in texts.items()]
    book = Book.build(entries, pc)
    ask = "remind me, what's my cat's name again"
    sel = book.select(pc, 60, datetime.fromisoformat(LATER.format(0)), {},
                      about=lambda: reader.read(ask, ask.split(), names))
    assert sel.about is not None and sel.about.holder == "cat" and len(sel.shown) <= 5
    assert ("cat" in sel.shown) is shown


def test_a_search_that_finds_an_old_version_weighs_the_line_that_replaced_it():
    """"what's my cat's name again" finds "and my cat Mothball…", superseded by "Mothball turned fifteen": the finding
    is the fact's, so the current line is chosen under the budget, not cut for it."""
    cfg = load_config({"gateway": {"profile": {"max_lines": 5}}})
    pc = cfg.gateway.profile
    reader = FrameReader(pc)
    texts = {"old": "and my cat Mothball, she's fourteen",
             "cat": "Mothball turned fifteen yesterday, she still sleeps on my keyboard",
             **{f"f{i}": f"i swim at pool number {i} every week, lane {i % 7}" for i in range(30)}}
    entries = [Entry(bid, "stable_boundary", t, 12, DAY1 if bid in ("old", "cat") else DAY2,
                     DAY1 if bid in ("old", "cat") else DAY2, 5, 0, reader.read(t, t.split(), {}))
               for bid, t in texts.items()]
    book = Book.build(entries, pc, learned={"old": ("cat", "changed_fact")})
    assert book.current_version("old") == "cat" and book.current_version("f3") == "f3"
    now = datetime.fromisoformat(LATER.format(0))
    found_old = book.select(pc, 60, now, {"old": 1.0, "f3": 0.4})
    assert "cat" in found_old.shown and "old" not in found_old.shown
    assert "cat" not in book.select(pc, 60, now, {"f3": 0.4}).shown  # without the finding it is an old line, cut


def test_a_profile_in_chinese_has_a_budget_of_its_own(tmp_path):
    """A Chinese line costs about three times the tokens of an English one stating as much: a profile whose lines
    are mostly CJK is chosen within ``gateway.budgets.profile_cjk``, and the section is fitted to the same budget."""
    cfg = {"gateway": {"budgets": {"profile": 60, "profile_cjk": 150}, "profile": {"max_lines": 50}}}
    with Brain.open(tmp_path / "data", cfg) as b:
        for i in range(20):
            b.write("zh", id=f"f{i}", title=f"习惯{i}", body=f"我每周{i % 7 + 1}去一次第{i}号健身房锻炼",
                    memory_layer="stable_boundary", memory_subject="user", created=DAY1)
            b.write("en", id=f"e{i}", title=f"habit {i}", body=f"i swim at pool number {i} every week, lane {i % 7}",
                    memory_layer="stable_boundary", memory_subject="user", created=DAY1)
        zh, en = b.turn("zh", "s", "今天好累", DAY2), b.turn("en", "s", "so tired today", DAY2)
        for turn, budget in ((zh, 150), (en, 60)):
            view = turn.debug["profile"].to_dict()
            assert view["budget"] == budget and 0.6 * budget < view["tokens"] <= budget
            assert len(turn.section("profile").items) == len(view["shown"])  # never trimmed again by the section fit


def test_the_profile_is_off_with_a_budget_of_zero(tmp_path):
    with Brain.open(tmp_path / "data", {"gateway": {"budgets": {"profile": 0}}}) as b:
        b.write(SPACE, id="dog", title="狗", body="我家狗叫可乐", memory_layer="stable_boundary", memory_subject="user")
        assert b.turn(SPACE, "s", "嗯嗯").section("profile") is None


def test_config_check_names_a_bad_profile_key(tmp_path):
    with pytest.raises(ConfigError, match=r"gateway\.profile\.hints\.0"):
        load_config({"gateway": {"profile": {"hints": ["favourite"]}}})
    with pytest.raises(ConfigError, match=r"gateway\.profile\.weights\.similarity"):
        load_config({"gateway": {"profile": {"weights": {"similarity": "high"}}}})


# ---------------------------------------------------------------- frames (pure)

@pytest.fixture(scope="module")
def reader():
    return FrameReader(load_config().gateway.profile)


def frames(reader, texts):
    names = {n: h for t in texts for n, h in reader.bindings(t)}
    return [Line(str(i), f"2026-0{i + 1}-01", reader.read(t, t.replace("，", " ").split(), names))
            for i, t in enumerate(texts)]


def test_a_name_binds_to_its_holder_and_later_lines_about_it(reader):
    assert dict(reader.bindings("我家狗叫可乐，柯基")) == {"可乐": "dog"}
    assert dict(reader.bindings("and my cat Mothball is fourteen")) == {"Mothball": "cat"}
    assert reader.read("可乐六岁了", [], {"可乐": "dog"}).holder == "dog"
    assert reader.read("I live in Leeds with my flatmate Yusuf", [], {"Yusuf": "flatmate"}).holder == "self"
    assert reader.read("我妈在医院当护士", [], {}).holder == "mother"


@pytest.mark.parametrize("old,new,rule", [
    ("我在阿里上班，做运营", "我跳槽了，现在在一家游戏公司上班", "same_attribute"),
    ("and my cat Mothball. she's fourteen", "Mothball turned fifteen yesterday", "same_attribute"),
    ("my cat is called Miso", "Miso passed away last week", "holder_ended"),
])
def test_a_newer_line_supersedes_an_older_one(reader, old, new, rule):
    got = supersessions(frames(reader, [old, new]), ["alive"], ["boss", "partner"])
    assert got == {"0": ("1", rule)}


@pytest.mark.parametrize("old,new", [
    ("I live in Milwaukee on Kestrel Street with my flatmate Yusuf", "Yusuf officially moved out on saturday"),
    ("我跟室友彤彤合租，住在城西", "彤彤搬走了，下周来新室友"),
    ("I live in Leeds with my dog Biscuit", "Biscuit died last night"),
])
def test_a_holder_who_left_takes_the_users_lines_that_name_them(reader, old, new):
    got = supersessions(frames(reader, [old, new]), ["alive"], ["boss", "partner"], departures=["left"])
    assert got == {"0": ("1", "holder_left")}


@pytest.mark.parametrize("old,new", [
    ("i'm allergic to cats, even Yusuf's cat makes me sneeze", "Yusuf moved out last week"),  # a care line stays
    ("my mom calls me every sunday", "Yusuf moved out last week"),                            # names someone else
    ("I live in Leeds with my flatmate Yusuf", "my sister moved out of our parents' place"),  # another holder left
])
def test_a_holder_who_left_takes_nothing_else(reader, old, new):
    names = {"Yusuf": "flatmate"}
    lines = [Line(str(i), f"2026-0{i + 1}-01", reader.read(t, t.split(), names)) for i, t in enumerate([old, new])]
    assert supersessions(lines, ["alive"], ["boss", "partner"], departures=["left"]) == {}


@pytest.mark.parametrize("old,new", [
    ("我表姐在杭州当小学老师", "我表哥在深圳上班"),                  # another holder
    ("我对芒果过敏", "我现在每天跑步五公里"),                          # a change, but of another thing
    ("she lives in Madison so i'll see the baby", "I live in Leeds now"),  # whose, the older does not say
])
def test_a_newer_line_about_something_else_supersedes_nothing(reader, old, new):
    assert supersessions(frames(reader, [old, new]), ["alive"], ["boss", "partner"]) == {}


def test_through_the_proxy_the_profile_reaches_the_model_and_is_never_remembered_as_the_user(tmp_path, standin,
                                                                                               monkeypatch):
    import httpx

    from .conftest import LiveServer

    monkeypatch.setenv("STANDIN_API_KEY", "k")
    cfg = {"server": {"default_space": SPACE}, "upstream": {"base_url": standin.url, "api_key_env": "STANDIN_API_KEY",
                                                              "timeout_s": 5, "retries": 0}}
    with Brain.open(tmp_path / "data", cfg) as b:
        fact(b, "dog", "我家狗叫可乐，柯基，五岁了")
        fact(b, "lesson", "我难过的时候你别讲道理，陪着我就好", layer="relationship_lesson")
        server = LiveServer(b)
        try:
            with httpx.Client(base_url=server.url, timeout=30) as c:
                r = c.post("/v1/chat/completions", json={"model": "m", "messages": [
                    {"role": "user", "content": "今天好难过"}]}, headers={"X-Ombre-Session-Id": "p1"})
        finally:
            server.close()
    assert r.status_code == 200, r.text
    sent = standin.chat_requests()[-1]["body"]["messages"]
    memory = next(m["content"] for m in sent if m["role"] == "system")
    assert "## Profile" in memory and "可乐" in memory and "别讲道理" in memory
    assert sent[-1] == {"role": "user", "content": "今天好难过"}


@pytest.mark.parametrize("said, shown, not_shown", [
    ("also i need to correct something. i told you Romilly's in Boise but i had it wrong, Boise was her old post. "
     "she's in Santa Fe now, has been since last fall", "Romilly: she's in Santa Fe now", "Boise"),
    ("阿栖我之前说错了，我爸其实是初中老师，教地理的，我老把他跟我大伯搞混", "我爸其实是初中老师", "说错了"),
])
def test_a_corrections_line_says_what_is_true_now(yu, said, shown, not_shown):
    fact(yu, "fix", said)
    line = yu.turn(SPACE, "s", "hi", DAY2).section("profile").items[0].text
    assert line.startswith(shown) and not_shown not in line


def test_a_shared_cue_word_the_changed_fact_model_refuses_never_hides_an_allergy(yu):
    """said_to_change read 不想再碰 (a sport) as a change of 磺胺 (an allergy): the model reads that pair at 0.005, so
    the rule's word is not enough (``gateway.profile.supersede.rule_floor``)."""
    fact(yu, "drug", "对了顺便跟你说，我对磺胺类的药过敏，小时候吃了浑身起风团，你帮我记着")
    fact(yu, "yoga", "好主意。对了我想找个不伤手的运动，瑜伽我小时候练过两年，太无聊了，不想再碰", when=DAY2)
    turn = yu.turn(SPACE, "s", "明天去诊所挂个水吧", LATER.format(0))
    assert "drug" in profile_ids(turn)
    floor0 = load_config({"gateway": {"profile": {"supersede": {"rule_floor": 0.0}}}})
    book = yu.profile.book(SPACE, floor0)
    assert book.superseded.get("drug", (None, None))[1] == "said_to_change"  # the rule alone still says so


@pytest.mark.parametrize("message,memory,other", [
    ("我表哥是干嘛的", "我表姐在杭州当小学老师", True),
    ("mom's already there. dad drove her down, first long drive since his surgery",
     "dad called, his knee surgery is on March 12", False),  # the message names him too, after her
    ("my sister called, she's due in may", "my brother Leo moved to Leeds", True),
])
def test_a_memory_about_another_person_cannot_answer_unless_the_message_names_them(reader, message, memory, other):
    assert reader.other_person(reader.read(message, message.split(), {}), memory) is other


@pytest.mark.parametrize("hints", [None, ["stable_boundary", "relationship_lesson"]])
def test_an_ending_told_as_an_event_ends_the_lines_it_is_about(tmp_path, hints):
    """By default an episode is a profile line while recent (``episode_days``); a persona whose profile holds facts
    and lessons alone still reads its episodes for the endings they tell."""
    cfg = {"gateway": {"profile": {"hints": hints}}} if hints else {}
    with Brain.open(tmp_path / "data", cfg) as b:
        _ending_told_as_an_event(b, episodes_shown=hints is None)


def _ending_told_as_an_event(yu, episodes_shown: bool):
    fact(yu, "cat", "and my cat Mothball. she's fourteen and acts like she owns the place")
    fact(yu, "home", "I live in Milwaukee on Kestrel Street with my flatmate Yusuf")
    fact(yu, "job", "i'm a QA tester at a game studio called Brightloop")
    fact(yu, "feet", "Yusuf made brownies and Mothball is sitting on my feet", when=DAY2, layer="process_event")
    turn = yu.turn(SPACE, "s", "hey", LATER.format(0))
    assert profile_ids(turn) == ["cat", "home", "job"]  # an event in passing ends nothing (and is 73 days old)
    fact(yu, "moved", "Yusuf officially moved out on saturday. it's just me and Mothball now", when=LATER.format(1),
         layer="process_event")
    fact(yu, "died", "Mothball passed away this morning. i held her the whole time", when=LATER.format(2),
         layer="process_event")
    turn = yu.turn(SPACE, "s", "hey", LATER.format(3))
    assert profile_ids(turn) == (["job", "moved", "died"] if episodes_shown else ["job"])
    why = {e["id"]: (e["reason"], e.get("superseded_by"), e.get("rule"))
           for e in turn.debug["profile"].to_dict()["entries"]}
    assert why["home"] == ("profile_superseded", "moved", "holder_left")
    assert why["cat"][:2] == ("profile_superseded", "died")
    assert why["cat"][2] == ("learned" if episodes_shown else "holder_ended")  # a line: the changed-fact model reads it
    if episodes_shown:  # the news is a line while recent (the brownies with Mothball are history now)
        assert why["died"][0] == why["moved"][0] == "profile_fits" and why["feet"][0] != "profile_fits"
    else:
        assert "died" not in why and "feet" not in why  # an episode is never a line of this persona's profile


def test_a_persona_whose_profile_holds_episodes_shows_what_happened_lately_not_all_of_it(tmp_path):
    cfg = {"identity": {"ai_name": "Ori", "user_name": "Cass"},
           "gateway": {"profile": {"hints": ["stable_boundary", "relationship_lesson", "process_event"],
                                   "episode_days": 14}}}
    with Brain.open(tmp_path / "data", cfg) as b:
        fact(b, "job", "i'm a QA tester at a game studio called Brightloop")
        fact(b, "font", "my manager Ambrose made me redo an entire test plan because of the font", when=DAY1,
             layer="process_event")
        fact(b, "gig", "went to see the Lumineers at the Riverside on saturday, cried at Ophelia", when=DAY2,
             layer="process_event")
        soon = b.turn(SPACE, "s", "how was your day", "2026-03-25T21:00:00+08:00")
        assert profile_ids(soon) == ["job", "gig"]  # the fight with Ambrose was 23 days ago, the gig 5
        why = {e["id"]: e["reason"] for e in soon.debug["profile"].to_dict()["entries"]}
        assert why["font"] == "profile_episode_past" and why["gig"] in ("profile_fits", "profile_line")
        later = b.turn(SPACE, "s", "how was your day", LATER.format(0))  # ten weeks on: the gig is past too
        assert profile_ids(later) == ["job"]
        assert "episode_days" in REASONS["profile_episode_past"]  # the debug pages say why, in words


def test_a_correction_kept_as_its_new_value_alone_still_replaces_the_old_line(yu):
    """The write decision keeps the line that states the fact ("Boise was her old post. she's in Santa Fe now");
    whose it is (Romilly, the cousin) and that it corrects something are said before it, in the same message."""
    fact(yu, "boise", "also my cousin Romilly texted out of nowhere. she's in Boise, she's a park ranger")
    yu.write(SPACE, id="santa_fe", title="Romilly", created=DAY2, memory_layer="stable_boundary",
             memory_subject="user", summary="Boise was her old post. she's in Santa Fe now",
             body="also i need to correct something. i told you Romilly's in Boise but i had it wrong, Boise was her "
                  "old post. she's in Santa Fe now, has been since last fall")
    turn = yu.turn(SPACE, "s", "where does Romilly live again", LATER.format(0))
    assert "santa_fe" in in_front(turn) and "boise" not in in_front(turn)
    assert yu.profile.book(SPACE, yu.config).superseded["boise"][0] == "santa_fe"


def test_an_exchange_written_leaves_the_profile_current_for_the_next_turn(yu):
    """The write's side reads the profile again (the proxy's ingestion runs after its reply), so the next turn does
    not rebuild it: in a lived-in store that is the changed-fact model over every member."""
    said = [{"role": "user", "content": "我家狗叫可乐，柯基，五岁了"}]
    yu.ingest_exchange(SPACE, "s", said, "可乐好可爱！", now=DAY1)
    held = yu.profile._spaces[(SPACE, yu.config.version)]
    assert held.seq == yu.store.change_head(SPACE) and held.book is not None
    assert any("可乐" in e.line for e in held.book.entries.values())
