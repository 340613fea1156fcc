"""The reader through real turns (design §25): each shape of question it must answer, and each near miss it must keep
out, in Chinese and English, on one small lived-in store of episodes and states (real e5, USE, jieba and Chroma).

The store is a user's few weeks: a fight with a colleague, an exam coming, a trip, a fever, a cousin's wedding, a
move, an interview, a sister at nursing school, a half marathon, an afternoon by a river. Every message below is met
in a session of its own, so no cooldown or carried topic helps a later one.
"""

from __future__ import annotations

import pytest

from ombre_brain import Brain

SPACE = "haven:yu"
AT = "2026-04-01T21:{:02d}:00+08:00"
MEMORIES = {
    "fight": ("上周和同事小林因为方案吵了一架，后来他主动来道歉了", "process_event", 2),
    "exam": ("下个月十五号考教资，最近每天刷题到半夜", "short_state", 3),
    "trip": ("国庆去了厦门，在鼓浪屿迷路了两个小时", "process_event", 4),
    "fever": ("这周发烧到三十九度，请了三天假", "short_state", 5),
    "wedding": ("表姐下个月在苏州办婚礼，我要去当伴娘", "process_event", 6),
    "job": ("我在杭州做UI设计", "stable_boundary", 1),
    "move": ("Last weekend I moved into a new flat in Leeds; the boiler broke on day one", "process_event", 7),
    "interview": ("I have a job interview at a bank next Tuesday and I'm nervous", "short_state", 8),
    "sister": ("My sister Mia just started nursing school in Glasgow", "process_event", 9),
    "marathon": ("Ran my first half marathon in Bristol, finished in 2h10", "process_event", 10),
    "river": ("Went down to the river bank with Leo to feed the ducks", "process_event", 11),
}
MEMORY_SECTIONS = ("recalled_memory", "diffused_memory")


@pytest.fixture(scope="module")
def yu(tmp_path_factory):
    with Brain.open(tmp_path_factory.mktemp("reader") / "data",
                    {"identity": {"ai_name": "星星", "user_name": "阿柚"}}) as b:
        for bid, (text, layer, day) in MEMORIES.items():
            b.write(SPACE, id=bid, title=text[:16], body=text, created=f"2026-03-{day:02d}T21:00:00+08:00",
                    memory_layer=layer, memory_subject="user")
        yield b


_sessions = iter(range(10_000))


def recalled(brain, message: str, context=()) -> tuple[list[str], dict]:
    """The memories a turn recalls (Recalled or Diffused Memory), and each candidate's admission reason."""
    n = next(_sessions)
    turn = brain.turn(SPACE, f"s{n}", message, AT.format(n % 60), context=list(context))
    got = [b for s in MEMORY_SECTIONS for b in turn.item_ids(s)]
    retrieval = turn.debug.get("retrieval")
    reasons = {c.bucket.id: c.admission.reason for c in (retrieval.candidates if retrieval is not None else ())}
    return got, reasons


def ctx(user: str, assistant: str) -> list[dict]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


ANSWERS = [  # (shape, message, context, the memory that answers it)
    ("direct zh", "我跟小林吵架那事你还记得吗", (), "fight"),
    ("direct zh", "表姐婚礼在哪办来着", (), "wedding"),
    ("direct en", "How fast was my half marathon?", (), "marathon"),
    ("paraphrase zh", "我同事后来有没有跟我道歉来着", (), "fight"),
    ("paraphrase en", "What's the interview I have coming up?", (), "interview"),
    ("followup zh", "那后来呢", ctx("上次和小林吵架的事你还记得吗", "记得，你们因为方案吵起来了。"), "fight"),
    ("followup en", "and then what happened?", ctx("remember my move to Leeds?", "Of course, the new flat!"), "move"),
    ("xlang zh->en", "我搬家那天什么东西坏了", (), "move"),
    ("xlang zh->en", "我妹妹在哪上学", (), "sister"),
    ("xlang en->zh", "What happened on my Xiamen trip?", (), "trip"),
    ("xlang en->zh", "Do you remember the argument I had with my coworker?", (), "fight"),
    ("unasked zh", "最近好累，每天刷题到凌晨", (), "exam"),
    ("unasked en", "I'm so nervous about Tuesday", (), "interview"),
]


@pytest.mark.parametrize(("shape", "message", "context", "wanted"), ANSWERS, ids=[a[0] + ": " + a[1] for a in ANSWERS])
def test_the_memory_that_answers_is_recalled(yu, shape, message, context, wanted):
    got, reasons = recalled(yu, message, context)
    assert wanted in got, (shape, got, reasons)
    assert reasons[wanted] in ("reader_answers", "reader_seconds")  # the reader read the pair and agreed
    assert len(got) <= 2, got  # and the rest of the store stays out


NEAR_MISSES = [  # (shape, message, the memories it nearly matches: none may be recalled)
    ("same person, other attribute, zh", "小林的生日是哪天", ("fight",)),
    pytest.param("same person, other attribute, en", "What city does Mia work in?", ("sister",),
                 marks=pytest.mark.xfail(strict=True, reason=(
                     "a known miss: the reader reads Mia's school against her job at 0.47, above the veto (0.3), and "
                     "no veto separates it from '还记得我学游泳的事吗' against the swimming memory (0.45); measured: "
                     "veto 0.5 changes no figure of eval conversation, but vetoes that answer"))),
    ("same attribute, other person, zh", "表哥什么时候结婚", ("wedding",)),
    ("same attribute, other person, en", "What's my brother studying?", ("sister",)),
    ("same words, other sense, en", "I need to go to the bank to open an account", ("river", "interview")),
    ("same words, other sense, zh", "周末想去河边钓鱼", ("river",)),
    ("same topic, never told, zh", "我高考那年考了多少分", ("exam",)),
    ("someone else's kin, en", "My sister's brother-in-law got a dog", ("sister",)),
]


@pytest.mark.parametrize(("shape", "message", "near"), NEAR_MISSES,
                         ids=[getattr(n, "values", n)[0] for n in NEAR_MISSES])
def test_a_near_miss_stays_out(yu, shape, message, near):
    got, reasons = recalled(yu, message)
    assert not set(near) & set(got), (shape, got, reasons)


def test_a_vetoed_near_miss_says_so_on_the_debug_page(yu):
    """"小林的生日是哪天": 小林 is written in the fight, so the words alone would admit it; the reader reads the pair
    and vetoes it, and the page shows both."""
    n = next(_sessions)
    turn = yu.turn(SPACE, f"s{n}", "小林的生日是哪天", AT.format(n % 60))
    fight = next(c for c in turn.debug["retrieval"].candidates if c.bucket.id == "fight")
    assert fight.admission.reason == "reader_vetoes" and fight.admission.routed is not None
    assert fight.admission.summary(turn.query).startswith("reader 0.")
    assert "does not answer `小林的生日是哪天`" in fight.admission.summary(turn.query)
