"""Query planning: what the query itself asks for, decided once per turn (design §5).

``RecallPolicy.plan_query`` turns a chat line into a frozen :class:`QueryPlan`. Every cue word
comes from ``config.cues`` (Chinese and English), so a persona designer changes behaviour in
YAML, not here. Steps 1 and 2 (normalising, cue matching) live in :mod:`ombre_brain.cues`. The runtime gates
that read the plan live in :mod:`ombre_brain.turn.gates`, registered in :mod:`ombre_brain.turn.gate_table`.

How a query is read:

1. **Normalise** (:func:`normalize`): NFKC, lower case, whitespace collapsed. A run of one CJK
   character collapses: to two when the doubled form is written in a cue (哈哈哈哈哈 → 哈哈,
   呜呜呜 → 呜呜), to one when the character is itself a one-character cue or particle
   (嗯嗯 → 嗯), to two when it runs three or more times, and otherwise stays (妈妈, 宝宝 and
   星星 are words). A repeated two-character CJK unit collapses to one (想你想你 → 想你). Latin
   runs of one letter (three or more) collapse to one (loool → lol), and a two-letter unit
   repeated three or more times to two (hahahaha → haha). Trailing punctuation, emoji and
   particles (``cues.trailing_particles``) drop, except a particle that is the whole query (哦).
2. **Match cues** against a folded form in which every Latin letter run and repeated Latin
   two-letter unit is cut to one (so goooood night matches "good night"). A CJK cue matches as
   a substring, a one-character CJK cue only as a whole token (旧 matches 旧照片, not 依旧), a
   Latin cue on word boundaries, and a cue with ``*`` matches with anything between its parts
   inside one sentence (最喜欢*回忆).
3. **Terms** are the tokenizer's tokens of the normalised query, minus stop words, minus the
   cue words of the lookup, recent, just-now, old, detail, favorite, tone, skip, check-in and
   body-chain lists (a cue the tokenizer splits, or a Latin phrase, is cut from the text first).
   An old cue that is also a conflict or repair cue (吵架, 冷战, 和好, fight) names the topic
   itself, so it stays a term.
4. **skip_reason**: ``empty`` when nothing is left; ``tone_only`` / ``skip_only`` when, after
   removing tone, filler and check-in cues, only particles, stop words and the two identity
   names are left (tone_only if a tone cue was among them) and no lookup, recent, old, detail or
   favorite cue was seen; ``vague`` for a lookup, recent, just-now, old, detail or favorite cue
   with no discriminative term or anchor left (还记得吗, 最近我们都聊了些什么): there is no topic to
   recall, while Recent Context and the favorite card, which a skip does not stop, still answer.
5. ``enforce_topic_evidence`` is always true: no mode relaxes admission; repair modes widen
   diffusion (``allow_caution_diffusion``), never the evidence a direct hit needs.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import lru_cache

from .asking import asks_to_recall
from .config import Config, Cues
from .cues import CueSet, cue_regex, fold, normalize, normalizer
from .recall_types import QueryPlan
from .text import fold as text_fold
from .text import has_cjk, is_cjk_text
from .turn.conversation import with_context

Tokenizer = Callable[[str, frozenset[str]], list[str]]

MAX_QUERY_CHARS = 2000   # a pasted essay is planned on its first 2,000 characters
PLAN_CACHE_SIZE = 512
_SENTENCE_END = ".!?。！？\n"
_is_cjk = has_cjk
_base = text_fold  # NFKC, lower case, straight apostrophes, single spaces

# Affect cues for the query's own temperature (used by dream resonance). Each row: cue words,
# valence (painful 0 .. sweet 1), arousal (cold 0 .. burning 1). Matches right after a negation
# (不/没/别, not/never/no) are ignored rather than flipped: "not sad" is not "happy".
AFFECT_CUES: tuple[tuple[tuple[str, ...], float, float], ...] = (
    (("难过", "伤心", "想哭", "哭了", "委屈", "失落", "孤独", "孤单", "心累", "崩溃",
      "sad", "cry", "crying", "lonely", "heartbroken", "depressed"), 0.2, 0.4),
    (("生气", "气死", "烦死", "受够", "angry", "furious", "annoyed", "pissed"), 0.2, 0.85),
    (("焦虑", "紧张", "担心", "害怕", "不安", "anxious", "nervous", "worried", "scared", "afraid"), 0.3, 0.75),
    (("疲惫", "好累", "没力气", "tired", "exhausted", "drained"), 0.35, 0.2),
    (("开心", "高兴", "快乐", "幸福", "兴奋", "太好了", "happy", "glad", "excited", "yay"), 0.85, 0.65),
    (("平静", "安心", "放松", "舒服", "温暖", "calm", "relaxed", "peaceful", "cozy"), 0.7, 0.2),
    (("想你", "爱你", "抱抱", "喜欢你", "miss you", "love you", "hug"), 0.8, 0.45),
)

# Cue lists whose words are about *how* the user asks, never *what* about: dropped from terms.
_TERM_FILTER_LISTS = ("memory_lookup", "explicit_recent", "just_now", "explicit_old", "detail_request",
                      "favorite_request", "tone_only", "skip_only", "check_in", "body_chain")
_FLAG_LISTS = ("explicit_recent", "just_now", "explicit_old", "memory_lookup", "favorite_request",
               "detail_request", "conflict", "repair", "intimate", "playful", "task", "check_in", "body_chain",
               "anaphora")
_PLAN_CUES = ("memory_lookup", "explicit_recent", "just_now", "explicit_old", "detail_request", "favorite_request")
_REMOVABLE = ("tone_only", "skip_only", "check_in")


@lru_cache(maxsize=1)
def _affect_sets() -> tuple[tuple[CueSet, float, float], ...]:
    return tuple((CueSet(words, Cues(), negation=True), v, a) for words, v, a in AFFECT_CUES)


# ---------------------------------------------------------------- the policy


def _default_tokenizer() -> Tokenizer:
    from .retrieval.lexical import tokenize  # lazy: jieba loads only when a plan is first made

    return tokenize


def _context_key(context) -> tuple:
    if not context:
        return ()
    if isinstance(context, Mapping):
        return tuple(sorted((str(k), repr(v)) for k, v in context.items()))
    return tuple((getattr(m, "role", ""), getattr(m, "content", repr(m))) for m in context)


def _alnum(token: str) -> bool:
    return any(ch.isalnum() for ch in token)


class RecallPolicy:
    """Plans queries for one config; plans are cached by (query, context, config.version)."""

    def __init__(self, config: Config, tokenizer: Tokenizer | None = None) -> None:
        self.config = config
        self._tokenizer = tokenizer
        self._stop = frozenset(w.lower() for w in config.lexical.stop_words)
        self._cache: OrderedDict[tuple, QueryPlan] = OrderedDict()
        self._lock = threading.Lock()
        self._prepare_lock = threading.Lock()
        self._ready = False

    # ------------------------------------------------------------ setup

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = _default_tokenizer()
        return self._tokenizer

    def _tokens(self, text: str, stop: frozenset[str] = frozenset()) -> list[str]:
        return [t.strip().lower() for t in self.tokenizer(text, stop) if t.strip() and _alnum(t)]

    def _prepare(self) -> None:
        """Compile cue lists once; needs the tokenizer to see which cues it splits."""
        cues = self.config.cues
        norm = self._norm = normalizer(cues)  # the cue sets looked up once, not once per cue
        self._sets = {name: CueSet(getattr(cues, name), cues, norm=norm) for name in _FLAG_LISTS}
        removable = []
        self._removable_chars: dict[str, str] = {}
        for kind in _REMOVABLE:
            cue_set = CueSet(getattr(cues, kind), cues, norm=norm)
            removable += [(w, p, kind) for w, p in cue_set.patterns]
            for ch in cue_set.chars:
                self._removable_chars.setdefault(ch, kind)
        self._removable = sorted(removable, key=lambda r: len(r[0]), reverse=True)
        particles = norm.particles
        ident = self.config.identity
        self._ignorable = (self._stop | frozenset(particles)
                           | {fold(_base(ident.ai_name)), fold(_base(ident.user_name)),
                              _base(ident.ai_name), _base(ident.user_name)})
        topical = {norm(c) for c in (*cues.conflict, *cues.repair)}
        masks: list[re.Pattern] = []
        drop: set[str] = set()
        for name in _TERM_FILTER_LISTS:
            for raw in getattr(cues, name):
                if name == "explicit_old" and norm(raw) in topical:
                    continue
                w = _base(raw) if "*" in raw else norm(raw)
                if not w:
                    continue
                if "*" in w or (not _is_cjk(w) and " " in w) or (_is_cjk(w) and len(self._tokens(w)) > 1):
                    pattern = cue_regex(w)
                    if pattern is not None:
                        masks.append(pattern)
                drop.update({w, fold(w)} if "*" not in w else {p.strip() for p in w.split("*") if p.strip()})
        self._masks = sorted(masks, key=lambda p: len(p.pattern), reverse=True)
        address = {fold(norm(c)) for c in cues.address_after} - {""}
        self._address = tuple(sorted(address, key=len, reverse=True))  # the longest first: "thank you" before "ty"
        self._drop = frozenset(drop)
        self._ahead = CueSet(cues.open_thread, cues, norm=norm)
        self._ready = True

    # ------------------------------------------------------------ planning

    def normalize(self, text: str) -> str:
        return self._norm(text) if self._ready else normalize(text, self.config.cues)

    def prepare(self) -> RecallPolicy:
        """Compile the cue lists now rather than on the first plan (a playground replay compiles its draft's
        before its first turn, so the turn's time and a cancel are not held up by it); returns itself."""
        if not self._ready:
            with self._prepare_lock:
                if not self._ready:
                    self._prepare()
        return self

    def points_ahead(self, text: str) -> bool:
        """Whether a memory's words point ahead (``cues.open_thread``: tomorrow, 下周, an appointment, results to
        come): an episode the user will come back to with how it went."""
        self.prepare()
        normalized = self._norm(text[:MAX_QUERY_CHARS])
        folded = fold(normalized)
        return bool(_DATE_RE.search(folded)) or self._ahead.matches(
            folded, frozenset(self._tokens(normalized)) if self._ahead.chars else frozenset())

    def clear_cache(self) -> None:
        """Forget cached plans (a purge: a cached query may quote what was forgotten)."""
        with self._lock:
            self._cache.clear()

    def plan_query(self, query: str, context: Mapping | None = None) -> QueryPlan:
        """The frozen plan for this query; the same query, context and config give the cached plan."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        key = (query, _context_key(context), self.config.version)
        with self._lock:
            plan = self._cache.get(key)
            if plan is not None:
                self._cache.move_to_end(key)
                return plan
        if context and not isinstance(context, Mapping):
            # the message's own plan is kept as well: the next turn hears this message and plans it without context
            plan = with_context(self.plan_query(query), context, lambda text: self.plan_query(text), self.config)
        else:
            plan = self._plan(query)
        with self._lock:
            self._cache[key] = plan
            while len(self._cache) > PLAN_CACHE_SIZE:
                self._cache.popitem(last=False)
        return plan

    def _plan(self, query: str) -> QueryPlan:
        self.prepare()
        text = query[:MAX_QUERY_CHARS]
        normalized = self._norm(text)
        if not _alnum(normalized):
            return QueryPlan(query=query, normalized=normalized, skip_reason="empty")
        folded = fold(normalized)
        tokens = frozenset(self._tokens(normalized))
        flags = {name: cue_set.matches(folded, tokens) for name, cue_set in self._sets.items()}
        flags.update(_question_flags(folded))
        if not flags["memory_lookup"] and asks_to_recall(text):  # "remind me what Romilly does", "…叫啥来着": one
            flags.update(memory_lookup=True, asks=True)            # detector with the write decision (asking.py)
        anchors = self._anchors(unicodedata.normalize("NFKC", text))
        terms = self._terms(normalized, self._quoted_words(unicodedata.normalize("NFKC", text)))
        valence, arousal = _affect(folded, tokens)
        mode = _context_mode(flags)
        return QueryPlan(
            context_mode=mode,
            explicit_recent=flags["explicit_recent"],
            explicit_old=flags["explicit_old"],
            just_now=flags["just_now"],
            detail_request=flags["detail_request"],
            favorite_request=flags["favorite_request"],
            wants_body_chain=flags["body_chain"] or flags["detail_request"],
            enforce_topic_evidence=True,
            allow_caution_diffusion=mode in ("conflict_repair", "reflective_repair"),
            skip_reason=self._skip_reason(folded, flags, terms, anchors),
            terms=terms,
            query=query,
            normalized=normalized,
            memory_lookup=flags["memory_lookup"],
            check_in=flags["check_in"],
            anchors=anchors,
            query_valence=valence,
            query_arousal=arousal,
            anaphoric=flags["anaphora"],
            cjk=is_cjk_text(query),
            asks=flags["asks"],
        )

    def _quoted_words(self, text: str) -> frozenset[str]:
        """Words the message quotes one at a time (别叫我“宝贝”, "you always say 'hugs'"): what it is about."""
        out = set()
        for m in _QUOTE_RE.finditer(text):
            words = self._tokens(self.normalize(next(g for g in m.groups() if g is not None)))
            if len(words) == 1:
                out.update(words)
        return frozenset(out)

    def _terms(self, normalized: str, quoted: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """The message's terms: its tokens without stop words and cue words, except that a cue word the message
        quotes on its own stays (别叫我“宝贝”: the quoted cue is what it is about)."""
        masked = normalized
        for pattern in self._masks:
            masked = pattern.sub(lambda m: " " + " ".join(g or "" for g in m.groups()) + " ", masked)
        out: dict[str, None] = {}
        for t in self._tokens(masked, self._stop):
            if t in self._stop or ((t in self._drop or fold(t) in self._drop) and t not in quoted):
                continue
            out.setdefault(t, None)
        return tuple(out)

    def _anchors(self, text: str) -> tuple[str, ...]:
        found: dict[str, None] = {}
        for m in _QUOTE_RE.finditer(text):
            inner = next(g for g in m.groups() if g is not None).strip()
            if inner:
                found.setdefault(inner, None)
        for m in _NUMBER_RE.finditer(text):
            found.setdefault(m.group(0), None)
        for m in _NAME_RE.finditer(text):
            word = m.group(0)
            low = word.lower()
            before = text[: m.start()].rstrip().rstrip("\"'“‘「『《(（")
            if not before or before[-1] in _SENTENCE_END:
                continue
            if low in self._ignorable or low in self._drop or fold(low) in self._drop:
                continue
            found.setdefault(word, None)
        return tuple(found)

    def _skip_reason(self, folded: str, flags: Mapping[str, bool], terms: tuple[str, ...],
                     anchors: tuple[str, ...]) -> str | None:
        if not any(flags[name] for name in _PLAN_CUES):
            rest, kinds = folded, set()
            for _, pattern, kind in self._removable:
                rest, n = pattern.subn(" ", rest)
                if n:
                    kinds.add(kind)
            meaningful = False
            for t in self._tokens(rest):
                if t in self._removable_chars:
                    kinds.add(self._removable_chars[t])
                elif t not in self._ignorable and fold(t) not in self._ignorable:
                    meaningful = True
                    break
            if not meaningful:
                return "tone_only" if "tone_only" in kinds else "skip_only"
            if self._only_addresses(folded):
                return "skip_only"
        asks = any(flags[name] for name in _PLAN_CUES)
        if asks and not anchors and not any(self._discriminative(t) for t in terms):
            return "vague"
        return None

    def _only_addresses(self, folded: str) -> bool:
        """Thanks or a greeting and one more word at most ("thanks mate", "hey Josh", 谢谢老公): that word names
        whom the message addresses, so a memory that mentions it is not what the message is about."""
        for prefix in self._address:
            if not folded.startswith(prefix):
                continue
            after = folded[len(prefix):]
            if after and not _is_cjk(prefix[-1]) and after[0].isalnum():
                continue  # "hiking", not "hi"
            return len(self._tokens(after)) <= 1  # "thanks for the book" is about the book
        return False

    def _discriminative(self, term: str) -> bool:
        return len(term) >= self.config.retrieval.min_term_chars if _is_cjk(term) else len(term) >= 2


_QUOTE_RE = re.compile(
    "「([^」]{1,50})」|『([^』]{1,50})』|“([^”]{1,50})”|\"([^\"\n]{1,50})\"|《([^》]{1,50})》"
    "|‘([^’]{1,50})’|(?<![A-Za-z0-9])'([^'\n]{1,50})'(?![A-Za-z0-9])"
)
_NUMBER_RE = re.compile(r"[0-9]+(?:[.:/-][0-9]+)*")
# a day of the month, said as the date something is on ("on the 24th", "March 12", "12号", "3月12日"): language
# structure beside the persona's cues.open_thread words
_DATE_RE = re.compile(r"\bon the \d{1,2}(?:st|nd|rd|th)?\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)"
                      r"[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?\b|\d{1,2}\s*[号日](?!子|常|记|本)")
_NAME_RE = re.compile(r"(?<![A-Za-z0-9'])[A-Z][A-Za-z]+(?:[-'][A-Za-z]+)?")


# 啥 and 咋 are the spoken 什么 and 怎么 ("我教啥的", "那教的啥科目呢").
_ASKS_RE = re.compile(r"[?？]|吗|什么|啥|哪|谁|(?<![这前好])几[个次天年号点]|多少|为什么|怎么|咋|是不是|有没有"
                      r"|^(what|which|who|when|where|why|how|do|did|does|is|are|was|were|can|could)\b")
_SELF_QUESTION_RE = re.compile(r"(我|我们|我家).*(什么|啥|哪|谁|(?<![这前好])几[个次天年号点]|多少)"
                               r"|(什么|啥|哪|谁).*(我|我们)|\b(what|which|who|when|where)\b.*\b(my|i|we|our|me)\b")


def _question_flags(folded: str) -> dict[str, bool]:
    """Whether a message asks at all, and whether it asks about the user's own life (their memories)."""
    return {"asks": bool(_ASKS_RE.search(folded)), "self_question": bool(_SELF_QUESTION_RE.search(folded))}


def _context_mode(flags: Mapping[str, bool]) -> str:
    """What the message is, in order: an apology, an upset, a question about the past, a request, closeness, play.

    An apology beats an upset ("that fight was my fault"); a fight, even one asked about as the past
    ("还记得我们吵架那次吗"), is talked about in repair mode. Recent or old times make a lookup only when
    the message asks about them (not "I've had a headache these days", not the check-in "最近怎么样"),
    and a question about the user's own life is a lookup ("我那只狗叫什么名字").
    """
    if flags["repair"]:
        return "reflective_repair"
    asks_past = (flags["memory_lookup"] or flags["favorite_request"] or flags["detail_request"]
                 or ((flags["explicit_old"] or flags["explicit_recent"]) and flags["asks"] and not flags["check_in"])
                 or (flags["self_question"] and not flags["task"] and not flags["check_in"]))
    if flags["conflict"]:  # a fight, even asked about as the past, is talked about gently
        return "conflict_repair"
    if asks_past:
        return "memory_lookup"
    for name in ("task", "intimate", "playful"):
        if flags[name]:
            return name
    return "casual"


def _affect(folded: str, tokens: frozenset[str]) -> tuple[float | None, float | None]:
    """The mean valence and arousal of the affect cue rows the query matches, or (None, None)."""
    rows = [(v, a) for cue_set, v, a in _affect_sets() if cue_set.matches(folded, tokens)]
    if not rows:
        return None, None
    return (round(sum(v for v, _ in rows) / len(rows), 3), round(sum(a for _, a in rows) / len(rows), 3))


def plan_query(query: str, config: Config, context: Mapping | None = None,
               tokenizer: Tokenizer | None = None) -> QueryPlan:
    """One-off planning without keeping a policy (tests, tools); the gateway keeps a RecallPolicy."""
    return RecallPolicy(config, tokenizer).plan_query(query, context)


__all__ = ["AFFECT_CUES", "RecallPolicy", "Tokenizer", "fold", "normalize", "plan_query"]
