"""The emotional temperature of a memory written from an exchange: valence (painful to sweet) and arousal.

Read from the exchange with the same cue rows the query planner uses for a message's affect
(``recall_policy.AFFECT_CUES``: sad, angry, anxious, tired, happy, calm, tender), plus rows for life events
whose weight a user seldom spells out ("我跟男朋友分手了" carries pain without the word 难过). A cue right
after a negation does not count ("不开心" is not happy). The user's words decide; when they say nothing, the
companion's reply may ("抱抱你，别太难过" tells the exchange was a sad one). Nothing matched: 0.5 and 0.3, the
bucket defaults. Pure.
"""

from __future__ import annotations

from functools import lru_cache

from ..config import Cues
from ..cues import CueSet, fold, normalize
from ..recall_policy import AFFECT_CUES

__all__ = ["EVENT_AFFECT", "affect_of"]

EVENT_AFFECT: tuple[tuple[tuple[str, ...], float, float], ...] = (
    (("分手", "去世", "走了", "离婚", "住院", "手术", "确诊", "被裁", "裁员", "失业", "挂科", "没考上", "吵架", "冷战",
      "broke up", "breakup", "passed away", "died", "divorce", "surgery", "hospital", "diagnosed", "laid off",
      "fired", "failed", "fight", "fought"), 0.25, 0.6),
    (("和好", "升职", "考上", "录取", "订婚", "求婚", "结婚", "怀孕", "出生", "毕业", "拿到offer", "made up",
      "promoted", "got into", "accepted", "engaged", "married", "graduated", "born", "got the job", "passed"),
     0.8, 0.6),
    (("不开心", "不高兴", "不好受", "不太好", "unhappy", "not happy", "not okay", "not ok"), 0.3, 0.4),
)
"""Life events and the temperature they carry when the user names no feeling; feelings said by negation."""

DEFAULT = (0.5, 0.3)


@lru_cache(maxsize=1)
def _rows() -> tuple[tuple[CueSet, float, float], ...]:
    cues = Cues()
    return tuple((CueSet(words, cues, negation=True), v, a) for words, v, a in (*AFFECT_CUES, *EVENT_AFFECT))


def _read(text: str) -> tuple[float, float] | None:
    if not text.strip():
        return None
    folded = fold(normalize(text, Cues()))
    hits = [(v, a) for cue_set, v, a in _rows() if cue_set.matches(folded, frozenset())]
    if not hits:
        return None
    return (round(sum(v for v, _ in hits) / len(hits), 3), round(sum(a for _, a in hits) / len(hits), 3))


def affect_of(user: str, reply: str = "") -> tuple[float, float]:
    """(valence, arousal) of an exchange: the user's words first, the reply's when the user's say nothing."""
    got = _read(user) or _read(reply) or DEFAULT
    if got is not DEFAULT and ("!" in user or "！" in user):  # an exclaimed feeling burns a little hotter
        got = (got[0], round(min(1.0, got[1] + 0.1), 3))
    return got
