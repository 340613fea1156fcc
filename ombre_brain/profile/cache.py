"""The profile of each space, kept current with the store's change sequence (the I/O half of the profile).

A turn must not read every stable memory of the space to show a dozen lines: :class:`ProfileCache` keeps each space's
:class:`~.book.Book` with the change number it is current to, as each process's lexical index does (design §16). A
turn reads the space's number (the turn scope already has it); when the space has changed since, only the buckets
the newer changes name are read again: a write, a join (a new claim), an edge (the writer's ``old_version`` link), an
update, a delete or a purge. A purge records its change in the purge's own transaction, so a purged line is gone
from the very next turn, and :meth:`ProfileCache.clear_cache` empties every space at once. A turn never embeds a
profile line: which lines matter now comes from the turn's own search (``turn/profile.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..buckets import Bucket, build_moments
from ..config import Config
from ..memory_layers import EPISODE_ROLE_HINTS, PROFILE_ROLE_HINTS, PROFILE_ROLE_SOURCES, infer_layer
from ..recall_types import LayerDecision
from ..retrieval.admission import sensitive
from ..retrieval.second_opinion import memory_vector
from ..text import is_cjk_text
from ..turn.budget import estimate_tokens
from .book import Book, Entry
from .frames import Frame, FrameReader, Line, supersessions
from .lines import profile_line, source_text, user_words
from .supersede import Member, decide, load_supersede, pair_rows

MEMBER_LAYERS = ("long_term_anchor", "dynamic_memory")  # pinned is Core Memory; archived, feel, kinds are not
SPACES = 256  # spaces (times configs) kept; the least recently used goes first


@dataclass
class _Raw:
    """What the book needs of one member bucket (never the whole bucket: a space may hold thousands)."""

    id: str
    hint: str
    line: str
    text: str           # all the user's words of it (the frame reads these)
    terms: tuple[str, ...]
    at: str
    active: str
    importance: int
    never: str | None
    layer: LayerDecision
    e5: np.ndarray | None = None   # the memory as a whole (mean of its content moments' stored vectors)
    use: np.ndarray | None = None  # the same for the second opinion's


@dataclass(frozen=True)
class _Told:
    """An episode the profile reads for the endings it tells, never shows (``gateway.profile.episodes_end``)."""

    id: str
    at: str
    text: str


@dataclass
class _Space:
    seq: int
    raws: dict[str, _Raw]
    claims: dict[str, int]
    linked: dict[str, str]            # old id -> new id (old_version edges between members)
    told: dict[str, _Told] = field(default_factory=dict)  # episodes, for the endings they tell
    frames: dict[str, Frame] = field(default_factory=dict)
    bound: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # id -> the names its line binds
    names: dict[str, str] = field(default_factory=dict)
    told_frames: dict[str, Frame] = field(default_factory=dict)
    book: Book | None = None


class ProfileCache:
    """Each space's profile book, per config, current to the space's change number."""

    def __init__(self, store, recall_counts: Callable[[str], dict[str, int]]) -> None:
        self.store = store
        self.recall_counts = recall_counts
        self._lock = threading.Lock()
        self._spaces: OrderedDict[tuple[str, str], _Space] = OrderedDict()
        self._readers: dict[str, FrameReader] = {}
        self.collect_vectors = False  # read members' vectors even with the changed-fact model off (fit-supersede)

    def book(self, space: str, cfg: Config, head: int | None = None) -> Book:
        """The space's book, current to change ``head`` (read from the store when not given)."""
        key = (space, cfg.version)
        with self._lock:
            got = self._spaces.get(key)
            if got is not None:
                self._spaces.move_to_end(key)
        if got is not None and head is not None and got.seq >= head and got.book is not None:
            return got.book
        if got is None:  # read the whole space, current to its number now
            fresh = self._read(space, cfg, head if head is not None else self.store.change_head(space))
        else:
            seq, changed = self.store.changed_since(space, got.seq)
            if changed == [] and got.book is not None:
                return got.book
            fresh = self._read(space, cfg, seq) if changed is None else self._update(got, space, cfg, seq, changed)
        with self._lock:
            self._spaces[key] = fresh
            self._spaces.move_to_end(key)
            while len(self._spaces) > SPACES:
                self._spaces.popitem(last=False)
        return fresh.book

    def inputs(self, space: str, cfg: Config) -> tuple[list[Member], np.ndarray, np.ndarray, dict]:
        """What the changed-fact model reads of a space's members that may be shown, read afresh (fit-supersede)."""
        s = self._read(space, cfg, self.store.change_head(space))
        return self.members([r for r in s.raws.values() if r.never is None], s.frames, cfg.gateway.profile)

    def message_frame(self, cfg: Config, book: Book, text: str, tokens) -> Frame:
        """A message's frame, read with the space's name bindings (whose it is about, what it asks)."""
        return self._reader(cfg).read(text, tokens, book.names)

    def clear_cache(self) -> None:
        """A purge: every space is read again (nothing of a purged memory stays in memory)."""
        with self._lock:
            self._spaces.clear()

    # ------------------------------------------------------------ reading

    def _members(self, space: str, cfg: Config, buckets: list[Bucket]) -> dict[str, _Raw]:
        pc = cfg.gateway.profile
        out = {}
        for b in buckets:
            if b.memory_layer not in pc.hints or b.memory_classification_source not in pc.sources:
                continue
            decision = infer_layer(b, cfg)
            if decision.layer not in MEMBER_LAYERS:
                continue
            never = ("dont_surface" if b.dont_surface else "anchor_only_when_asked" if b.anchor
                     else "sensitive_unasked" if sensitive(b, cfg) else None)
            reader = self._reader(cfg)
            text = user_words(b)  # its frame reads all it says: whose it is may be said before the line
            line = profile_line(b, pc.line_chars if is_cjk_text(source_text(b)) else pc.line_chars_latin,
                                reader.weight)
            out[b.id] = _Raw(b.id, b.memory_layer or "", line, text, tuple(self.store.tokens(text)), b.created,
                             b.last_active or b.created, b.importance, never, decision)
        if out and (cfg.gateway.profile.supersede.id is not None or self.collect_vectors):
            self._vectors(space, [b for b in buckets if b.id in out], out)
        return out

    def _vectors(self, space: str, buckets: list[Bucket], raws: dict[str, _Raw]) -> None:
        """Each member's stored vectors as a whole (never an embedding: they were computed when it was written)."""
        ids = {b.id: [m.id for m in build_moments(b) if not m.context_only] for b in buckets}
        every = [m for ms in ids.values() for m in ms]
        e5 = self.store.get_vectors(space, every)
        use = self.store.second_vectors(space, every) if self.store.second is not None else {}
        for bid, ms in ids.items():
            raws[bid].e5 = memory_vector([np.asarray(e5[m], dtype=np.float32) for m in ms if m in e5])
            raws[bid].use = memory_vector([np.asarray(use[m], dtype=np.float32) for m in ms if m in use])

    def _list(self, space: str, cfg: Config) -> list[Bucket]:
        pc = cfg.gateway.profile
        if set(pc.hints) <= {*PROFILE_ROLE_HINTS, *EPISODE_ROLE_HINTS} and set(pc.sources) <= set(PROFILE_ROLE_SOURCES):
            return self.store.list(space, role="profile", limit=None)
        return self.store.list(space, limit=None)  # a persona's profile holds other hints: no index names them

    @staticmethod
    def _told(cfg: Config, buckets: list[Bucket], members: Mapping[str, _Raw]) -> dict[str, _Told]:
        """The episodes among ``buckets`` (a writer's ``process_event`` / ``short_state``, not a member), read for the
        endings they tell: "Mothball crossed the rainbow bridge", "Yusuf officially moved out", kept as events."""
        pc = cfg.gateway.profile
        if not pc.episodes_end:
            return {}
        return {b.id: _Told(b.id, b.created, user_words(b)) for b in buckets
                if b.id not in members and b.memory_layer in EPISODE_ROLE_HINTS
                and b.memory_classification_source in pc.sources and not b.dont_surface}

    def _read(self, space: str, cfg: Config, seq: int) -> _Space:
        listed = self._list(space, cfg) if self.store.known_space(space) else []
        raws = self._members(space, cfg, listed)
        s = _Space(seq, raws, self.store.claim_counts(space, list(raws)), self._linked(space, raws),
                   self._told(cfg, listed, raws))
        self._finish(s, space, cfg, changed=None)
        return s

    def _update(self, old: _Space, space: str, cfg: Config, seq: int, changed: list[str]) -> _Space:
        got = self.store.get_many(space, changed)
        raws = {k: v for k, v in old.raws.items() if k not in changed}
        raws.update(self._members(space, cfg, [got[i] for i in changed if i in got]))
        told = {k: v for k, v in old.told.items() if k not in changed}
        told.update(self._told(cfg, [got[i] for i in changed if i in got], raws))
        claims = {k: v for k, v in old.claims.items() if k not in changed}
        claims.update(self.store.claim_counts(space, [i for i in changed if i in raws]))
        linked = {o: n for o, n in old.linked.items() if o not in changed and n not in changed}
        linked.update(self._linked(space, {i: raws[i] for i in changed if i in raws}, among=raws))
        s = _Space(seq, raws, claims, linked, told, dict(old.frames), dict(old.bound), dict(old.names),
                   dict(old.told_frames))
        self._finish(s, space, cfg, changed=set(changed))
        return s

    def _linked(self, space: str, raws: dict[str, _Raw], among: dict[str, _Raw] | None = None) -> dict[str, str]:
        """The writer's own ``old_version`` edges (new -> old) between members: the old one is superseded."""
        among = raws if among is None else among
        if not raws:
            return {}
        return {e.to_id: e.from_id for e in self.store.edges(space, list(raws))
                if e.relation == "old_version" and e.from_id in among and e.to_id in among}

    def _finish(self, s: _Space, space: str, cfg: Config, changed: set[str] | None) -> None:
        """Name bindings, frames (every one again when the bindings changed, else only the changed lines'), then the
        book."""
        reader = self._reader(cfg)
        for r in s.raws.values():
            if changed is None or r.id in changed or r.id not in s.bound:
                s.bound[r.id] = reader.bindings(r.text)
        names = {n: h for r in sorted(s.raws.values(), key=lambda r: (r.at, r.id)) for n, h in s.bound[r.id]}
        again = changed is None or names != s.names
        s.frames = {r.id: (reader.read(r.text, r.terms, names) if again or r.id in changed or r.id not in s.frames
                           else s.frames[r.id]) for r in s.raws.values()}
        s.told_frames = {t.id: (reader.read(t.text, (), names) if again or t.id in changed
                                or t.id not in s.told_frames else s.told_frames[t.id]) for t in s.told.values()}
        s.names = names
        s.bound = {k: v for k, v in s.bound.items() if k in s.raws}
        recalls = self.recall_counts(space)
        entries = [Entry(r.id, r.hint, r.line, estimate_tokens(r.line), r.at, r.active, r.importance,
                         max(0, s.claims.get(r.id, 1) - 1), s.frames[r.id], r.never, recalls.get(r.id, 0), r.layer)
                   for r in s.raws.values()]
        told = [Line(t.id, t.at, s.told_frames[t.id]) for t in s.told.values()]
        s.book = Book.build(entries, cfg.gateway.profile, s.linked, self.learned(s.raws, s.frames, cfg, told), told)
        s.book.names = names

    def learned(self, raws: Mapping[str, _Raw], frames: Mapping[str, Frame], cfg: Config,
                told: Sequence[Line] = ()) -> dict | None:
        """The changed-fact model's supersessions among the members that may be shown (None: it is off, or the
        vectors it reads are missing, and the frame rules decide); ``told``: episodes, for the endings they tell
        (the model never reads them: an ending told stands on its own words)."""
        pc = cfg.gateway.profile
        if pc.supersede.id is None:
            return None
        model = load_supersede(pc.supersede.id, pc.supersede.path)
        shown = [r for r in raws.values() if r.never is None]
        if any(r.e5 is None or r.use is None for r in shown):
            return None
        members, e5, use, rules = self.members(shown, frames, pc)
        # the attributes the model was fitted with, in its order: a persona's own attribute is no input of it
        fitted = tuple(f.removeprefix("attr_") for f in model.features if f.startswith("attr_"))
        pairs, x = pair_rows(members, e5, use, rules, fitted, pc.endings)
        threshold = pc.supersede.threshold if pc.supersede.threshold is not None else model.threshold
        probs = model.predict(x) if pairs else np.zeros(0, dtype=np.float32)  # one line alone, or none near another
        out = {old: (new, rule) for old, (new, rule, _p) in decide(members, pairs, probs, threshold).items()}
        # the rules trusted beside the model (gateway.profile.supersede.rules), where the model does not refuse the
        # pair (``rule_floor``): a shared cue word alone (公司, called, 不*了) hid true facts in a lived-in store
        # (a refused link leaves the older line current, for a later one the model agrees with)
        read = {(members[i].id, members[j].id): float(v) for (i, j), v in zip(pairs, probs, strict=True)}
        if pc.supersede.rule_floor > 0:
            lines = [Line(m.id, m.at, m.frame, m.family) for m in members]
            reader, text = self._reader(cfg), {m.id: m.text for m in members}
            events = frozenset(t.id for t in told)
            rules = supersessions([*lines, *told], pc.endings, pc.exclusive_holders,
                                  accept=lambda o, n: n in events or read.get((o, n), 0.0) >= pc.supersede.rule_floor
                                  or reader.says_change_plainly(text[n]), departures=pc.departures, told=events)
        for old, (new, rule) in rules.items():
            if rule in pc.supersede.rules:
                out.setdefault(old, (new, rule))
        return out

    @staticmethod
    def members(raws: Sequence[_Raw], frames: Mapping[str, Frame], pc) -> tuple[list[Member], np.ndarray,
                                                                                  np.ndarray, dict]:
        """What the changed-fact model reads of members: their frames, vectors and the rules' verdicts."""
        members = [Member(r.id, r.at, r.text, frames[r.id], "lesson" if r.hint == "relationship_lesson" else "fact",
                          r.hint == "stable_boundary") for r in raws]
        lines = [Line(m.id, m.at, m.frame, m.family) for m in members]
        rules = supersessions(lines, pc.endings, pc.exclusive_holders)  # as fitted: no holder_left
        e5 = np.stack([r.e5 for r in raws]) if raws else np.zeros((0, 1), np.float32)
        use = np.stack([r.use for r in raws]) if raws else np.zeros((0, 1), np.float32)
        return members, e5, use, rules

    def _reader(self, cfg: Config) -> FrameReader:
        reader = self._readers.get(cfg.version)
        if reader is None:
            reader = self._readers[cfg.version] = FrameReader(cfg.gateway.profile)
        return reader


__all__ = ["ProfileCache"]
