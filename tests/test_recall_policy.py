"""plan_query (design §5): normalising, cue matching, every plan field in Chinese and English."""

from __future__ import annotations

import dataclasses
import re
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ombre_brain import recall_policy
from ombre_brain.config import load_config
from ombre_brain.recall_policy import RecallPolicy, fold, normalize


def _fallback_tokenizer(tmp_dir):
    """jieba search mode for Han runs, lower-case words otherwise (what ombre_brain.lexical does)."""
    import jieba

    if not jieba.dt.initialized:
        jieba.dt.tmp_dir = str(tmp_dir)
    han = re.compile(r"[\u3400-\u9fff]+|[^\W_]+(?:'[^\W_]+)*")

    def tokenize(text: str, stop_words: frozenset[str] = frozenset()) -> list[str]:
        out = []
        for piece in han.findall(unicodedata.normalize("NFKC", text).lower()):
            parts = jieba.cut_for_search(piece) if re.match(r"[\u3400-\u9fff]", piece) else [piece]
            out += [t for t in parts if t.strip() and t not in stop_words]
        return out

    return tokenize


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    cache = tmp_path_factory.mktemp("jieba")
    try:
        from ombre_brain.retrieval import lexical
    except ImportError:
        return _fallback_tokenizer(cache)
    lexical.init_jieba(cache)
    return lexical.tokenize


@pytest.fixture(scope="module")
def cfg():
    return load_config({"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}})


@pytest.fixture(scope="module")
def policy(cfg, tokenizer):
    return RecallPolicy(cfg, tokenizer)


def plan(policy, q):
    return policy.plan_query(q)


# ---------------------------------------------------------------- normalize


@pytest.mark.parametrize("raw,expected", [
    ("哈哈哈哈哈", "哈哈"),
    ("哈哈", "哈哈"),
    ("呜呜呜呜", "呜呜"),
    ("嗯嗯", "嗯"),
    ("嗯嗯嗯嗯", "嗯"),
    ("想你想你想你", "想你"),
    ("好想你呀～", "好想你"),
    ("我回来啦！！", "我回来"),
    ("妈妈做的菜", "妈妈做的菜"),          # a doubled character that is a word stays
    ("宝宝", "宝宝"),
    ("太好了好好好", "太好了好"),
    ("HAHAHAHA", "haha"),
    ("hahaha", "haha"),
    ("loool", "lol"),
    ("  Love   you  <3 ", "love you <3"),
    ("ｏｋ！", "ok"),
    ("还记得吗？？？😂😂", "还记得吗"),
    ("哦", "哦"),                          # a particle that is the whole query stays
    ("呢呢呢", "呢"),
    ("???", ""),
    ("", ""),
])
def test_normalize(cfg, raw, expected):
    assert normalize(raw, cfg.cues) == expected


def test_fold_cuts_letter_runs_and_units():
    assert fold("goooood night") == "god night"
    assert fold("good night") == fold("goood night")
    assert fold("hahahaha") == fold("haha") == "ha"
    assert fold("哈哈哈") == "哈哈哈"  # CJK is left to normalize


# ---------------------------------------------------------------- skip reasons

TONE_ONLY = [
    "想你了，抱抱", "哈哈哈", "哈哈哈哈哈哈", "抱抱", "亲亲~", "贴贴贴贴", "爱你", "呜呜呜", "嘿嘿", "嘻嘻嘻",
    "么么哒", "好想你呀", "想你想你想你", "摸摸", "我也想你", "爱你哦", "晚安吻",
    "miss you", "Miss you!!", "love you lol", "lol", "LOOOL", "hahahaha", "haha", "hugs", "xoxo", "<3", "awww",
    "kisses", "hehe", "love you <3", "i miss you", "哈哈 lol",
]
SKIP_ONLY = [
    "晚安", "ping", "好的", "ok", "OK!", "okay", "嗯", "嗯嗯", "哦", "噢", "行", "收到", "test", "hi", "hello",
    "Hello Haven", "hey", "在吗", "在吗？", "在不在", "早", "早安", "晚上好", "你好呀", "我回来啦", "我回来了",
    "goodnight", "good night", "Good morning!", "Goooood morning", "thanks", "thank you", "谢谢", "好吧",
    "知道了", "yes", "no", "yep", "sure", "i'm back", "brb", "你在干嘛", "how are you", "are you there",
    "晚安 Haven", "啦", "是吗", "nighty night", "night night",
]


@pytest.mark.parametrize("q", TONE_ONLY)
def test_tone_only(policy, q):
    p = plan(policy, q)
    assert p.skip_reason == "tone_only", (q, p.normalized)


@pytest.mark.parametrize("q", SKIP_ONLY)
def test_skip_only(policy, q):
    p = plan(policy, q)
    assert p.skip_reason == "skip_only", (q, p.normalized)


def test_at_least_thirty_casual_examples_each_language():
    cjk = [q for q in TONE_ONLY + SKIP_ONLY if re.search(r"[\u4e00-\u9fff]", q)]
    latin = [q for q in TONE_ONLY + SKIP_ONLY if not re.search(r"[\u4e00-\u9fff]", q)]
    assert len(cjk) >= 30 and len(latin) >= 30


@pytest.mark.parametrize("q, term", [("do you remember the love letter", "love"), ("what did my honey buy me", "honey"),
                                     ("my baby brother's birthday", "baby"), ("how is my mate Josh", "mate"),
                                     ("how is Sweetie doing?", "sweetie"), ("we watched Babe again", "babe")])
def test_words_that_name_things_are_not_endearment_cues(policy, q, term):
    """Tone cues are cut from a message's terms, and English endearments also name things (a love letter, a
    cat called Sweetie, the film Babe): none of them is a cue."""
    p = plan(policy, q)
    assert p.skip_reason is None and term in p.terms, (q, p.terms)


@pytest.mark.parametrize("q", ["thanks mate", "Thanks, Josh!", "thank you love", "cheers mate", "hey Josh", "hiya",
                               "谢谢老公", "多谢小明"])
def test_thanks_or_a_greeting_and_whom_it_addresses_is_casual(policy, q):
    """"thanks mate" thanks someone: "mate" is whom it addresses (a memory of "my mate Josh" is not its topic)."""
    assert plan(policy, q).skip_reason == "skip_only", (q, plan(policy, q).terms)


@pytest.mark.parametrize("q, term", [("thanks for the book", "book"), ("thanks mate, how is Josh doing?", "josh"),
                                     ("hiking trip", "hiking"), ("morning run", "run"), ("night shift", "shift"),
                                     ("back pain", "pain"), ("hey, what is my dog called?", "dog"),
                                     ("谢谢你帮我订的票", "票")])
def test_more_than_an_address_keeps_its_topic(policy, q, term):
    """One word after thanks or a greeting is an address; more is a topic, and "morning" or "back" make compounds."""
    p = plan(policy, q)
    assert p.skip_reason is None and term in p.terms, (q, p.terms)


def test_the_address_cues_come_from_config():
    """The address cues are policy: a persona designer may take one out, and then the message is planned as before."""
    cfg = load_config({"cues": {"address_after": ["thanks"]}})
    p = RecallPolicy(cfg)
    assert p.plan_query("thanks mate").skip_reason == "skip_only"
    assert p.plan_query("hey Josh").skip_reason is None


@pytest.mark.parametrize("q, term", [("why do you always say 'hugs' at the end?", "hugs"),
                                     ("你以后别叫我“宝贝”了", "宝贝")])
def test_a_quoted_cue_word_is_what_the_message_is_about(policy, q, term):
    p = plan(policy, q)
    assert p.skip_reason is None and term in p.terms and term in p.anchors, (q, p.terms)
    unquoted = plan(policy, q.replace("'", "").replace("“", "").replace("”", ""))
    assert term not in unquoted.terms  # the same word unquoted is a tone cue, cut from the terms
    assert not {"ok", "lol"} & set(plan(policy, "she texted me 'ok lol'").terms)  # a quoted phrase of cues stays cues


@pytest.mark.parametrize("q", ["", "   ", "😂😂", "？？？", "...", "❤️"])
def test_empty(policy, q):
    assert plan(policy, q).skip_reason == "empty"


@pytest.mark.parametrize("q", ["还记得吗", "你还记得吗？", "记不记得", "还记得那次吗", "do you remember?",
                               "Do you remember it?", "remember?"])
def test_vague(policy, q):
    p = plan(policy, q)
    assert p.skip_reason == "vague", (q, p.terms)
    assert p.memory_lookup


@pytest.mark.parametrize("q,flag", [
    ("最近我们都聊了些什么", "explicit_recent"), ("what did you do recently?", "explicit_recent"),
    ("你刚才说什么", "just_now"), ("以前的事", "explicit_old"), ("原话是什么", "detail_request"),
    ("你最喜欢的回忆是什么", "favorite_request"),
])
def test_other_lookup_cues_without_topic_are_vague(policy, q, flag):
    # nothing to search for: Recent Context / the favorite card answer instead (a skip does not stop them)
    p = plan(policy, q)
    assert getattr(p, flag) is True
    assert p.skip_reason == "vague", (q, p.terms)
    assert plan(policy, "最近工作怎么样").skip_reason is None


@pytest.mark.parametrize("q", [
    "还记得我们第一次吃火锅吗", "你是不是觉得我今天有点冷淡", "想你了，还记得我们去海边那次吗",
    "搬家的事准备得怎么样了",
    "Do you remember the name of the parrot I had as a kid?", "miss you, how was the trip to Kyoto",
    "我今天在便利店买了一包薄荷糖", "最近工作怎么样", "还记得“老地方”吗", "好的，那明天几点去医院",
    "hello, what did the vet say about the cat",
])
def test_content_is_not_skipped(policy, q):
    assert plan(policy, q).skip_reason is None, plan(policy, q)


def test_tone_cue_with_a_lookup_cue_is_not_tone_only(policy):
    # a lookup cue means the user asks something; with no topic it is vague, not tone
    assert plan(policy, "抱抱，还记得吗").skip_reason == "vague"


# ---------------------------------------------------------------- fields, Chinese and English

FIELD_CASES = [
    ("explicit_recent", "最近我们都聊了些什么", "What did we talk about lately?"),
    ("explicit_recent", "这几天你过得怎么样", "how have you been these days"),
    ("just_now", "你刚才说什么", "what did you say just now"),
    ("explicit_old", "我们以前是不是因为搬家吵过架", "we used to live by the sea"),
    ("explicit_old", "那时候你在哪", "back then you lived in Paris"),
    ("detail_request", "她当时的原话是什么", "what were her exact words"),
    ("favorite_request", "你最喜欢我们之间的哪一段回忆", "what is your favorite memory of us"),
    ("favorite_request", "印象最深的一次旅行", "your favourite moment with me"),
    ("memory_lookup", "你还记得我小时候养的那只鹦鹉叫什么名字吗", "Do you remember the parrot I had?"),
    ("memory_lookup", "想起我们去海边的那天", "recall the day at the beach"),
    ("check_in", "在吗", "are you there"),
    ("wants_body_chain", "为什么那天你生气了", "why did the trip end early"),
    ("wants_body_chain", "她当时的原话是什么", "what were her exact words"),  # detail implies body chain
]


@pytest.mark.parametrize("field,zh,en", FIELD_CASES)
def test_field_true_in_both_languages(policy, field, zh, en):
    assert getattr(plan(policy, zh), field) is True, zh
    assert getattr(plan(policy, en), field) is True, en


@pytest.mark.parametrize("field", ["explicit_recent", "just_now", "explicit_old", "detail_request",
                                   "favorite_request", "memory_lookup", "check_in", "wants_body_chain"])
@pytest.mark.parametrize("q", ["年糕刚来家里那天是什么样子", "the cat slept all afternoon"])
def test_field_false_without_cue(policy, field, q):
    assert getattr(plan(policy, q), field) is False


CONTEXT_MODES = [
    ("conflict_repair", "你凭什么这样说我", "I'm so angry at you"),
    ("conflict_repair", "我们又吵架了", "we had a fight again"),
    ("reflective_repair", "对不起，昨天是我不好", "sorry about yesterday"),
    ("memory_lookup", "还记得我们去海边那次吗", "do you remember the beach trip"),
    ("memory_lookup", "我们以前住在哪", "back then where did we live"),
    ("memory_lookup", "你最喜欢我们之间的哪一段回忆", "what's your favorite memory"),
    ("memory_lookup", "她的原话是什么", "her exact words please"),
    ("task", "帮我写一个请假条", "help me write an email"),
    ("intimate", "想你了，抱抱", "miss you so much"),
    ("playful", "哈哈哈哈", "lol"),
    ("casual", "今天天气不错", "the weather is nice today"),
]


@pytest.mark.parametrize("mode,zh,en", CONTEXT_MODES)
def test_context_mode(policy, mode, zh, en):
    assert plan(policy, zh).context_mode == mode, zh
    assert plan(policy, en).context_mode == mode, en


def test_context_mode_precedence(policy):
    assert plan(policy, "还记得我们吵架那次吗").context_mode == "conflict_repair"     # conflict before lookup
    assert plan(policy, "对不起，还记得那天吗").context_mode == "reflective_repair"  # repair before lookup
    assert plan(policy, "帮我想想抱抱怎么说").context_mode == "task"                 # task before intimate
    assert plan(policy, "哈哈，想你").context_mode == "intimate"                     # intimate before playful


@pytest.mark.parametrize("q,expected", [
    ("我们又吵架了", True), ("sorry about yesterday", True), ("还记得我们去海边那次吗", False), ("lol", False),
])
def test_caution_diffusion_only_in_repair_modes(policy, q, expected):
    assert plan(policy, q).allow_caution_diffusion is expected


@pytest.mark.parametrize("q", ["还记得吗", "哈哈", "我们又吵架了", "帮我写一个请假条", "what happened back then"])
def test_topic_evidence_is_always_enforced(policy, q):
    assert plan(policy, q).enforce_topic_evidence is True


# ---------------------------------------------------------------- terms


def test_terms_drop_cue_words(policy, cfg):
    p = plan(policy, "还记得我们第一次吃火锅吗")
    assert {"第一次", "火锅"} <= set(p.terms)
    assert not {"记得", "还记得", "还", "吗", "我们"} & set(p.terms)
    assert plan(policy, "最近我们都聊了些什么").terms == ("聊",)
    p = plan(policy, "这几天你还记得我说的原话吗")
    assert not {"几天", "这几天", "原话", "记得"} & set(p.terms)


def test_terms_english(policy):
    p = plan(policy, "Do you remember the name of the parrot I had as a kid?")
    assert set(p.terms) == {"name", "parrot", "kid"}
    p = plan(policy, "what did we do last time at the beach, just now you said")
    assert "beach" in p.terms
    assert not {"last", "time", "just", "now"} & set(p.terms)


def test_terms_keep_topical_old_cues(policy):
    # 吵架 marks old material but is also the topic itself (a conflict cue), so it stays a term
    assert "吵架" in plan(policy, "还记得我们吵架那次吗").terms
    assert "fight" in plan(policy, "do you remember our first fight").terms
    assert "以前" not in plan(policy, "我们以前是不是因为搬家吵过架").terms
    assert "搬家" in plan(policy, "我们以前是不是因为搬家吵过架").terms


def test_terms_keep_doubled_words(policy):
    assert "妈妈" in plan(policy, "你还记得我妈妈的生日吗").terms


def test_terms_are_unique_and_lower_case(policy):
    p = plan(policy, "Kyoto kyoto KYOTO trip")
    assert p.terms.count("kyoto") == 1
    assert all(t == t.lower() for t in p.terms)


@pytest.mark.parametrize("q,terms", [
    ("还记得我们第一次吃火锅吗", {"第一次", "火锅"}),
    ("年糕刚来家里那天是什么样子", {"年糕", "家里"}),
    ("还记得在双廊看日出的那个早上吗", {"双廊", "日出"}),
    ("五月天演唱会那天你还记得什么", {"五月天", "演唱会"}),
    ("还记得我去面试产品经理那次吗", {"面试", "产品"}),
    ("洗衣机修好了吗", {"洗衣机"}),
])
def test_scenario_terms(policy, q, terms):
    assert terms <= set(plan(policy, q).terms)


# ---------------------------------------------------------------- anchors


def test_anchors(policy):
    assert "老地方" in plan(policy, "你还记得“老地方”吗").anchors
    assert "老地方" in plan(policy, "你还记得「老地方」吗").anchors
    assert "小王子" in plan(policy, "还记得我们一起读的《小王子》吗").anchors
    assert "blue door" in plan(policy, 'remember the "blue door" cafe').anchors
    p = plan(policy, "Did Amy call you in 2024?")
    assert "Amy" in p.anchors and "2024" in p.anchors
    assert "Did" not in p.anchors                        # sentence start is not a name
    assert "Amy" not in plan(policy, "Amy called me. Was it fun").anchors
    assert "Haven" not in plan(policy, "还记得Haven说的话吗").anchors  # the identity names are not anchors
    assert "Kyoto" in plan(policy, "还记得我们在Kyoto的那天吗").anchors
    assert plan(policy, "I'm fine, don't worry").anchors == ()


def test_anchor_keeps_a_lookup_from_being_vague(policy):
    assert plan(policy, "还记得“那个”吗").skip_reason is None


# ---------------------------------------------------------------- cue matching rules


def test_latin_cues_match_on_word_boundaries(policy):
    assert not plan(policy, "this gold ring is bold").explicit_old      # old inside gold/bold
    assert plan(policy, "my old ring").explicit_old
    assert plan(policy, "what did you say just now?").just_now
    assert not plan(policy, "this is a chip").check_in


def test_one_character_cjk_cue_matches_whole_tokens_only(policy):
    assert plan(policy, "翻出了旧照片").explicit_old
    assert not plan(policy, "我依旧喜欢你").explicit_old


def test_wildcard_cue(policy):
    assert plan(policy, "你最喜欢的回忆是什么").favorite_request
    assert plan(policy, "你最喜欢哪段记忆").favorite_request
    assert not plan(policy, "我最喜欢吃火锅。回忆起来真好").favorite_request  # the gap stays in one sentence


def test_cues_come_from_config(tokenizer):
    cfg = load_config({"cues": {"tone_only": ["mua", "么么"], "explicit_recent": ["近日"]}})
    p = RecallPolicy(cfg, tokenizer)
    assert p.plan_query("mua mua").skip_reason == "tone_only"
    assert p.plan_query("近日可好").explicit_recent
    assert p.plan_query("haha").skip_reason is None  # the overlay replaced the tone list


# ---------------------------------------------------------------- affect


@pytest.mark.parametrize("q,low_valence", [
    ("我好难过，想哭", True), ("I feel so lonely tonight", True), ("今天好开心", False), ("so happy today", False),
])
def test_query_affect(policy, q, low_valence):
    p = plan(policy, q)
    assert p.query_valence is not None and p.query_arousal is not None
    assert (p.query_valence < 0.5) is low_valence


def test_query_affect_unknown_and_negated(policy):
    assert plan(policy, "洗衣机修好了吗").query_valence is None
    assert plan(policy, "我不开心").query_valence is None  # a negated cue is ignored, not flipped
    assert plan(policy, "I'm not sad").query_valence is None


# ---------------------------------------------------------------- scenarios


@pytest.mark.parametrize("q,expect", [
    ("最近我们都聊了些什么", {"explicit_recent": True, "skip_reason": "vague"}),
    ("你最喜欢我们之间的哪一段回忆", {"favorite_request": True}),
    ("你还记得我小时候养的那只鹦鹉叫什么名字吗", {"context_mode": "memory_lookup", "skip_reason": None}),
    ("Do you remember the name of the parrot I had as a kid?", {"context_mode": "memory_lookup",
                                                                "skip_reason": None}),
    ("我们以前是不是因为搬家吵过架", {"explicit_old": True, "skip_reason": None}),
    ("搬家的事准备得怎么样了", {"explicit_old": False, "skip_reason": None}),
    ("晚安", {"skip_reason": "skip_only"}),
    ("ping", {"skip_reason": "skip_only"}),
    ("好的", {"skip_reason": "skip_only"}),
    ("ok", {"skip_reason": "skip_only"}),
    ("嗯嗯", {"skip_reason": "skip_only"}),
    ("我回来啦", {"skip_reason": "skip_only", "explicit_recent": False}),
    ("想你了，抱抱", {"skip_reason": "tone_only"}),
    ("你是不是觉得我今天有点冷淡", {"skip_reason": None, "context_mode": "casual"}),
    ("还记得我们去海边那次吗", {"terms": ("海边",), "context_mode": "memory_lookup"}),
])
def test_scenario_plans(policy, q, expect):
    p = plan(policy, q)
    for key, value in expect.items():
        assert getattr(p, key) == value, (q, key, getattr(p, key))


def test_plan_to_dict_has_exactly_the_turn_keys(policy):
    d = plan(policy, "还记得我们去海边那次吗").to_dict()
    assert set(d) == {"context_mode", "explicit_recent", "explicit_old", "just_now", "detail_request",
                      "favorite_request", "wants_body_chain", "enforce_topic_evidence", "allow_caution_diffusion",
                      "skip_reason", "terms"}
    assert d["terms"] == ["海边"]


# ---------------------------------------------------------------- cache and plumbing


def test_plan_is_frozen_and_cached(policy):
    p = policy.plan_query("还记得我们去海边那次吗")
    assert policy.plan_query("还记得我们去海边那次吗") is p
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.terms = ()  # type: ignore[misc]


def test_cache_key_includes_context_and_version(cfg, tokenizer):
    calls = []

    def counting(text, stop):
        calls.append(text)
        return tokenizer(text, stop)

    p = RecallPolicy(cfg, counting)
    p.plan_query("海边")
    n = len(calls)
    p.plan_query("海边")
    assert len(calls) == n
    p.plan_query("海边", {"session": "s1"})
    assert len(calls) > n
    other = load_config({"cues": {"tone_only": ["海边"]}})
    assert other.version != cfg.version
    assert RecallPolicy(other, tokenizer).plan_query("海边").skip_reason == "tone_only"


def test_cache_is_bounded(cfg, tokenizer, monkeypatch):
    monkeypatch.setattr(recall_policy, "PLAN_CACHE_SIZE", 3)
    p = RecallPolicy(cfg, tokenizer)
    first = p.plan_query("q0")
    for i in range(1, 6):
        p.plan_query(f"q{i}")
    assert len(p._cache) == 3
    assert p.plan_query("q0") is not first


def test_tokenizer_is_lazy(cfg):
    def boom(text, stop):
        raise AssertionError("should not be called before a plan is made")

    RecallPolicy(cfg, boom)  # constructing does not tokenize


def test_default_tokenizer_is_lexical(cfg):
    pytest.importorskip("ombre_brain.retrieval.lexical")
    p = RecallPolicy(cfg)
    assert "海边" in p.plan_query("还记得我们去海边那次吗").terms


def test_non_string_query_is_a_type_error(policy):
    with pytest.raises(TypeError):
        policy.plan_query(None)  # type: ignore[arg-type]


def test_module_level_plan_query(cfg, tokenizer):
    assert recall_policy.plan_query("晚安", cfg, tokenizer=tokenizer).skip_reason == "skip_only"


def test_long_query_is_planned_on_its_head(policy):
    p = policy.plan_query("还记得我们去海边那次吗" + "雨" * 10000)
    assert "海边" in p.terms


# ---------------------------------------------------------------- property


CUE_WORDS = ["还记得", "最近", "以前", "原话", "最喜欢", "回忆", "哈哈", "抱抱", "晚安", "ok", "lol", "remember",
             "吵架", "的", "了", "吗", "the", "我们", "火锅", "“", "”", "《", "》", "'", '"', "*", "  ", "\n"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=80), st.lists(st.sampled_from(CUE_WORDS) | st.text(max_size=4), max_size=12)
                 .map("".join)))
def test_plan_never_raises_and_terms_have_no_stop_words(policy, cfg, q):
    p = policy.plan_query(q)
    stop = {w.lower() for w in cfg.lexical.stop_words}
    assert not set(p.terms) & stop
    assert p.skip_reason in (None, "empty", "tone_only", "skip_only", "vague")
    assert p.context_mode in ("conflict_repair", "reflective_repair", "memory_lookup", "intimate", "playful",
                              "task", "casual")
    assert all(t.strip() for t in p.terms)
    if p.skip_reason == "empty":
        assert p.terms == ()
