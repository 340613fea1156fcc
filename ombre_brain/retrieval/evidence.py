"""The admission stage's I/O: the query's background in the space, exact cosines, the second opinion.

Everything here gathers numbers from the store and the encoders and hands them to the pure
:mod:`.admission`, which computes the features and the verdict (design §13). Kept apart from
:mod:`.candidates` so that search and admission stay two stages of the pipeline.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from time import perf_counter

import numpy as np

from ..buckets import PARAGRAPH_MAX, bucket_id_of, build_moments
from ..config import AdmissionModel, Config
from ..recall_types import Candidate, QueryPlan
from ..store.interfaces import Search
from ..text import CJK_RE
from . import admission
from .admission import (
    AskedTerms,
    Background,
    QueryEvidence,
    admit,
    asked_terms,
    bucket_is_cjk,
    content_cosine,
    memory_is_cjk,
    query_evidence,
    said_of,
    script_ranks,
)
from .alignment import Alignment, align, memory_words
from .answer_types import held_types
from .background import load_reference
from .candidates import Retrieval, query_vector
from .dict_evidence import KEY_SHARE, DictEvidence, dict_evidence, names_thing
from .dictionary import bridge as dictionary_bridge
from .features import FEATURES, INPUTS
from .lexical import general_idf, names_a_thing, names_a_time, tokenize
from .mention import key_things
from .reading import Reading
from .second_opinion import memory_vector
from .terms import normalize_term, specificity, term_weight
from .word_table import load_word_table, table_words

log = logging.getLogger("ombre_brain")

BACKGROUND_SAMPLE = 256  # moments whose cosines to the query are its background in the space
MIN_BACKGROUND = 8
MIN_IDF_MOMENTS = 8  # below this a space's own idf cannot tell common words from rare ones
SHORT_MOMENT = PARAGRAPH_MAX * 2 // 5  # a moment cut out of a longer sentence is over half PARAGRAPH_MAX long
# before stripping (text.sentence_spans), and only such a cut can fall inside a word
WORD_CACHE = 4096  # buckets whose words are kept (they are cut by jieba once per version)
FULL_ROUNDS = 100  # the collector's third threshold in a prepared process: its rounds of the middle generation
# between full collections (Python's default 10)
WARM_WORDS = 8192  # the store's most frequent words a prepared process encodes at start (0.3 ms each)
PAIR_CACHE = 200_000  # pairs of words the dictionary has answered for, kept across turns (emptied when full)
PRONOUNS = frozenset("我你他她咱俺")  # a possessive jieba keeps with a one-character noun (我姐: my sister)


def warm_tables() -> None:
    """Load the tables admission reads lazily (jieba's dictionary and tags, its IDF table, wordfreq's English list),
    so the first turn that needs one does not pay for loading it."""
    tokenize("预热 warm")
    names_a_thing("预热")
    general_idf("预热")
    specificity("warm")


_thresholds: dict[str, int] = {}  # the collector's full-collection threshold before a prepare(freeze=True)


def thaw() -> None:
    """Give the process its garbage collector back as it was before ``Admitter.prepare(freeze=True)``: every object
    in its rounds again, full collections at their old pace."""
    gc.unfreeze()
    if "full" in _thresholds:
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, _thresholds.pop("full"))


class _Unencoded(Exception):
    """A word the second opinion has not encoded yet: the dictionary's one-pass reading gives way to the batched one."""


class Admitter:
    """Admission for one store: each weighed candidate's evidence, against the fitted model of its embedders."""

    def __init__(self, store: Search, config: Config) -> None:
        self.store = store
        self.cfg = config
        self._samples: dict[str, tuple[int, tuple]] = {}  # space -> (moments when sampled, the sample)
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._stop = frozenset(w.casefold() for w in config.lexical.stop_words)
        self._words: OrderedDict[tuple, tuple[str, ...]] = OrderedDict()  # bucket version -> its words
        self._pairs: dict[tuple, object] = {}  # the dictionary's answer per pair of words (dict_evidence's memo)
        self.reading = Reading(store, config, self._wholes)

    def admit(self, space: str, plan: QueryPlan, found: Retrieval, now: datetime | None = None) -> Retrieval:
        """The admission stage: each candidate's evidence and verdict (design §13), on the found candidates; with a
        reader (design §25), the weighed candidates' verdicts are the reader's."""
        if not found.candidates:
            return found
        t0 = perf_counter()
        model = self.admission_model(self.model_key())
        reader = self.reading.model()
        needs = FEATURES.inputs_of(model.feature_names) if model is not None else frozenset()
        if self.cfg.retrieval.dictionary:
            needs |= {"dictionary"}
        if reader is not None:
            needs |= FEATURES.inputs_of(reader.feature_names)
        q = self.query_evidence(space, plan, found, needs=needs)
        read, bars, others = {}, None, frozenset()
        if reader is not None:
            # Core Memory is the user's own pinned set, often several facts to one memory: its routes decide (§13)
            weighed = [c for c in found.candidates
                       if q.weighs(c, self.cfg.retrieval.admission.max_rank) and not c.bucket.pinned]
            read, others = self.reading.read(reader, space, plan, found, q, weighed, now)
            bars = self.reading.bars(reader)
        cands = tuple(dataclasses.replace(c, admission=admit(c, q, cfg=self.cfg, model=model,
                                                             reader=read.get(c.bucket.id), reader_bars=bars,
                                                             other_person=c.bucket.id in others))
                      for c in found.candidates)
        ms = dict(found.ms, admission=(perf_counter() - t0) * 1000)
        return dataclasses.replace(found, candidates=cands, ms=ms)

    def model_key(self) -> str:
        """What admission weights are fitted for: the embedder, plus the second opinion when it is on."""
        second = self.store.second
        emb = self.store.embedder.model_id
        return f"{emb}+{second.model_id}" if second is not None else emb

    def query_evidence(self, space: str, plan: QueryPlan, found: Retrieval, *,
                       needs: frozenset[str] | None = None) -> QueryEvidence:
        """What admission knows about the query: its asked terms, its background, the channels' ranks, and for the
        candidates it weighs, exact cosines, the second opinion and the word alignment. ``needs`` names the inputs
        the model's features read (:data:`~.features.INPUTS`; None: all of them); the others are not gathered."""
        needs = frozenset(INPUTS) if needs is None else needs
        emb = self.store.embedder
        query = plan.query or plan.normalized
        asked = asked_terms(plan.terms, idf=self._idf(space), cfg=self.cfg, context=plan.context_terms)
        background = exact = second = None
        cjk = {c.bucket.id: memory_is_cjk(c) for c in found.candidates}  # each memory's script, once per turn
        heard = [t for t, _w in plan.topic]
        said = said_of(found.candidates, heard)
        ranks = script_ranks(found.candidates, cjk, said)
        max_rank = self.cfg.retrieval.admission.max_rank
        weighed = [c for c in found.candidates if ranks.get(c.bucket.id, max_rank + 1) <= max_rank]
        aligned = self._alignment(asked, weighed) if "alignment" in needs else {}
        dictionary = (self._dictionary(asked, weighed, plan.terms, lookup=not plan.unasked)
                      if "dictionary" in needs else {})
        things = self._things(asked) if plan.unasked and self.cfg.retrieval.implicit_recall else ()
        if needs & {"dense", "second_opinion"} and query.strip():
            qvec = found.qvec if found.qvec is not None else query_vector(emb.query, plan, self.cfg)
            sample = self._sample(space)
            if sample is not None:
                background = Background.of(sample[0], (sample[1] @ np.asarray(qvec, dtype=np.float32)).tolist(),
                                           sample[2])
            else:  # a store too young for a background of its own stands against the fixed reference
                background = self._reference_background(emb, qvec)
            exact = self._exact_cosines(space, qvec, [c for c in weighed if content_cosine(c) is None])
            second = self._second_opinion(space, plan, weighed, sample) if "second_opinion" in needs else {}
        standing = use_standing = None
        if "reference" in needs and query.strip():
            qvec = found.qvec if found.qvec is not None else query_vector(emb.query, plan, self.cfg)
            standing = self.reference(emb).standing(qvec)
            if self.store.second is not None:
                use_standing = self.reference(self.store.second).standing(query_vector(self.store.second.query, plan,
                                                                                       self.cfg))
        return query_evidence(found.candidates, asked, query_is_cjk=plan.query_is_cjk, background=background,
                              cjk_capable=emb.cjk_capable, exact=exact, second=second, aligned=aligned, cjk=cjk,
                              standing=standing, use_standing=use_standing,
                              lookup=not plan.unasked, heard=heard, dictionary=dictionary, things=things, said=said)

    def _reference_background(self, encoder, qvec) -> Background:
        """The query's background in a space too young for its own sample (fewer than ``MIN_BACKGROUND`` moments):
        the fixed reference of ordinary memories (:mod:`.background`), per script, so a store of one memory gets a
        real standing instead of none (design §13, §17)."""
        ref = self.reference(encoder)
        cos = (ref.vectors @ np.asarray(qvec, dtype=np.float32)).tolist()
        return Background.of([f"reference{i}#1" for i in range(len(cos))], cos, ref.cjk.tolist())

    def prepare(self, *, freeze: bool = False) -> None:
        """Build and load what admission reads on every turn (the dictionary bridge, the reference backgrounds, jieba's
        tables, the English word frequencies, the store's own words for alignment), so no user's turn pays for a first
        load (0.2–2 s each): the server calls this at start, and so does ``bench``; commands that never admit never do.

        ``freeze``: then take every object built so far (the bridge alone is about a million) out of the garbage
        collector's rounds (:func:`gc.freeze`), since a full collection walking them cost a turn 100 ms now and
        then, and make full collections ten times rarer (``FULL_ROUNDS``): what stays in the rounds is mostly the
        bounded caches of decoded buckets and layers, and walking them cost a turn 9–23 ms every 40 turns or so at
        100k (design §23). A process-wide choice, so only for a process of our own (``serve``, ``bench``), never
        for a host application that embeds the library; :func:`thaw` gives a process its collector back."""
        model = self.admission_model(self.model_key())
        needs = FEATURES.inputs_of(model.feature_names) if model is not None else frozenset()
        warm_tables()
        if "dictionary" in needs or self.cfg.retrieval.dictionary:
            bridge = dictionary_bridge()
            if self.store.second is not None:  # the words most readings compare, encoded once (design §23)
                load_word_table(self.store.second, table_words(bridge))
        if "reference" in needs:
            self.reference(self.store.embedder)
            if self.store.second is not None:
                self.reference(self.store.second)
        if "alignment" in needs and self.store.second is not None:
            self.warm_words()
        if freeze:
            gc.collect()
            gc.freeze()
            young, middle, full = gc.get_threshold()
            _thresholds.setdefault("full", full)
            gc.set_threshold(young, middle, FULL_ROUNDS)

    def warm_words(self, limit: int = WARM_WORDS) -> int:
        """Encode for word alignment the words the store's memories hold (up to ``limit``, the most frequent), as
        :meth:`_memory_words` reads them: a memory's words met for the first time were encoded inside the turn,
        5–12 ms on the turns that met several, which were the slowest turns of a run (design §23). Returns how many
        were encoded; a purge empties them with the rest of the word cache."""
        words = dict.fromkeys(normalize_term(w) for w in self.store.vocabulary(limit))
        return self.store.second.warm([w for w in words if w and w not in self._stop])

    def reference(self, encoder):
        """The encoder's reference background (shipped, else embedded once and kept in the data directory)."""
        return load_reference(encoder.model_id, encoder.passages, getattr(self.store, "data_dir", None))

    def _idf(self, space: str):
        """The space's idf; in a space of a few moments every word is "common", so there a seen word counts as
        discriminative (a new user's first memories are recalled by their words from the first day)."""
        idx = self.store.lexical(space)
        if len(idx) >= MIN_IDF_MOMENTS:
            return idx.idf
        floor = self.cfg.retrieval.min_idf
        return lambda t: max(idx.idf(t), floor) if idx.doc_freq(t) else 0.0

    def _exact_cosines(self, space: str, qvec: np.ndarray, cands: Sequence[Candidate]) -> dict[str, float]:
        """Cosines of candidates lexical search alone found, from their best content moment's stored vector."""
        best = {c.bucket.id: next((h.moment.id for h in c.hits if not h.moment.context_only), None) for c in cands}
        got = self.store.get_vectors(space, [m for m in best.values() if m])
        q = np.asarray(qvec, dtype=np.float32)
        return {bid: float(got[m] @ q) for bid, m in best.items() if m in got}

    def _second_opinion(self, space: str, plan: QueryPlan, cands: Sequence[Candidate],
                        sample: tuple | None) -> dict[str, tuple[float, float]]:
        """The second opinion's cosine of the query to each weighed memory as a whole, and its z-score against
        the same cosines of the space's sampled memories written in its script (:class:`Background`): USE too
        puts a Chinese question nearer Chinese memories, so an English answer stood low against both scripts."""
        enc = self.store.second
        if enc is None or not cands:
            return {}
        qv = query_vector(enc.query, plan, self.cfg)
        wholes = self._wholes(space, [c.bucket for c in cands])
        bg = None
        if sample is not None and sample[3] is not None:
            ids, matrix, cjk = sample[3]
            bg = Background.of(ids, (matrix @ qv).tolist(), cjk)
        elif sample is None:
            bg = self._reference_background(enc, qv)
        out = {}
        for c in cands:
            vec = wholes.get(c.bucket.id)
            if vec is not None:
                cos = float(vec @ qv)
                out[c.bucket.id] = (cos, bg.within(memory_is_cjk(c)).z(cos, c.bucket.id) if bg is not None else 0.0)
        return out

    def _wholes(self, space: str, buckets: Sequence) -> dict[str, np.ndarray]:
        """Each memory read as the whole of what it says: the mean of its content moments' second-opinion vectors.

        A question asks about a memory, not about one of its sentences: "the beach trip" is the title (一起去海边看
        日出), the place and the sunrise of the moment together. The best single moment let a one-line memory on a
        near topic (a trip diary) outscore it; the memory's mean separates answers from near misses better where
        memories have sections, and is the moment itself where they have one. Inside a turn the vectors come with the
        candidates' moments (:meth:`moments_with_buckets`), so this reads nothing more.
        """
        ids = {b.id: [m.id for m in build_moments(b) if not m.context_only] for b in buckets}
        vecs = self.store.second_vectors(space, [m for ms in ids.values() for m in ms])
        wholes = {bid: memory_vector([vecs[m] for m in ms if m in vecs]) for bid, ms in ids.items()}
        return {bid: v for bid, v in wholes.items() if v is not None}

    def _alignment(self, asked: AskedTerms, cands: Sequence[Candidate]) -> dict[str, Alignment]:
        """Each candidate's word alignment to what the message asks (its own terms, else the conversation's),
        from the second opinion's word vectors; none where the second opinion is off."""
        enc = self.store.second
        if enc is None or not cands:
            return {}
        groups = asked.groups[:asked.message_groups] if asked.message_groups else asked.groups
        asked_words = [t for members, _ in groups for t in members]
        if not asked_words:
            return {}
        words = {c.bucket.id: self._memory_words(c.bucket) for c in cands}
        vectors = enc.words(list(dict.fromkeys([normalize_term(t) for t in asked_words]
                                               + [w for ws in words.values() for w in ws])))
        return {bid: align([members for members, _ in groups], ws, vectors, stop=self._stop)
                for bid, ws in words.items()}

    def _dictionary(self, asked: AskedTerms, cands: Sequence[Candidate], terms: Sequence[str] = (), *,
                    lookup: bool = True) -> dict[str, DictEvidence]:
        """Each candidate's reading through the bilingual dictionary (:mod:`.dict_evidence`): what it holds of the
        message's terms in any language, and whether a key term meets a different thing of the same kind.

        Besides the asked terms, a single Chinese character with one clear meaning (哥, 姐, 狗: ``Bridge.clear``) is
        read here too, though too short to be a lexical term: "我哥" against a memory of 姐 is the near miss."""
        if not cands:
            return {}
        bridge = dictionary_bridge()
        # the message's own terms (a follow-up that says none of its own reads the conversation's, for matches only:
        # a conflict is the message's own key term meeting a different thing, never a context term's)
        own = asked.message_groups if asked.message_groups is not None else len(asked.groups)
        # weighed by how specific each term is in its language, English too ("grandma" outweighs "went" and "see"),
        # as word alignment weighs them: the dictionary's share is read on the terms that name the topic
        groups = [(m, w * max(specificity(x) / term_weight(x) for x in m))
                  for m, w in asked.groups[:own] or asked.groups]
        if own == 0 and groups:  # a follow-up's topic is what the conversation named, its key terms, not its chat
            top = max(w for _, w in groups)
            groups = [(m, w) for m, w in groups if w >= KEY_SHARE * top]
        conflicts = own > 0 and lookup  # a near miss is a question about a different thing; a statement asks none
        have = {m for members, _ in groups for m in members}
        singles = [t[1:] if len(t) == 2 and t[0] in PRONOUNS else t for t in terms]  # 我姐 → 姐
        groups += [((t,), specificity(t)) for t in dict.fromkeys(singles)
                   if t not in have and t not in self._stop and bridge.clear(t)]
        if not groups:
            return {}
        enc = self.store.second
        words = {c.bucket.id: self._memory_words(c.bucket) for c in cands}
        vectors: dict[str, np.ndarray | None] = {}
        wanted: set[str] = set()

        def probe(a: str, b: str) -> None:  # a dry run: which words would a cosine read?
            wanted.update(w for w in (a, b) if w not in vectors)

        def cos(a: str, b: str) -> float | None:
            if enc is None:
                return None
            missing = [w for w in (a, b) if w not in vectors]
            if missing:
                vectors.update(enc.words(missing))
            va, vb = vectors.get(a), vectors.get(b)
            return float(va @ vb) if va is not None and vb is not None else None

        def warm(a: str, b: str) -> float | None:  # only words already encoded; any other ends this reading
            missing = [w for w in (a, b) if w not in vectors]
            if missing:
                got = enc.cached(missing)
                if got is None:
                    raise _Unencoded
                vectors.update(got)
            return cos(a, b)

        if len(self._pairs) > PAIR_CACHE:
            self._pairs.clear()

        def read(word_cos, memo=None) -> dict[str, DictEvidence]:
            out = {}
            for c in cands:
                texts = [t for _, t in admission.admissible_texts(c.bucket)]
                out[c.bucket.id] = dict_evidence([(tuple(m), w) for m, w in groups], words[c.bucket.id], bridge,
                                                 lambda t, texts=texts: any(admission.found(t, x) for x in texts),
                                                 word_cos, conflicts=conflicts, thing=names_a_thing, time=names_a_time,
                                                 memo=memo)
            return out

        if enc is None:
            return read(cos)
        try:  # a conversation's words are mostly encoded already: then one reading is all it takes
            return read(warm, self._pairs)
        except _Unencoded:
            pass
        # With every cosine unknown the reading tries every pair a real one could reach (none matches early), so the
        # words it names are all the words the real reading reads: encoded in one batch, not one call per pair (six
        # times cheaper a word; a cold English question met hundreds of them, design §23). A dry run keeps no answer.
        read(probe)
        if wanted:
            vectors.update(enc.words(sorted(wanted)))
        return read(cos, self._pairs)

    def _things(self, asked: AskedTerms) -> tuple[str, ...]:
        """A statement's key terms that name things (:mod:`.mention`), weighed by specificity as the dictionary's
        groups are; an English word is read as a thing only through the dictionary (off: Chinese words only)."""
        own = asked.message_groups if asked.message_groups is not None else len(asked.groups)
        groups = [(m, w * max(specificity(x) / term_weight(x) for x in m)) for m, w in asked.groups[:own]]
        bridge = dictionary_bridge() if self.cfg.retrieval.dictionary else None

        def thing(t: str) -> bool:
            if bridge is not None:
                return names_thing(t, bridge, names_a_thing)
            return bool(CJK_RE.search(t)) and names_a_thing(t)
        return key_things(groups, None, thing)

    def _memory_words(self, b) -> tuple[str, ...]:
        """A memory's admissible words (title, summary, tags, main body), cut once per version of its text."""
        key = (b.space, b.id, b.content_hash(), b.summary or "")
        with self._lock:
            hit = self._words.get(key)
            if hit is not None:
                self._words.move_to_end(key)
                return hit
        cut = self._stored_cut(b)
        words = (memory_words((b.title, b.summary or "", "\n".join(b.tags), b.main_text), self.store.tokens, self._stop)
                 if cut is None else memory_words((b.summary or "", "\n".join(b.tags)), self.store.tokens, self._stop,
                                                  cut=cut))
        with self._lock:
            self._words[key] = words
            while len(self._words) > WORD_CACHE:
                self._words.popitem(last=False)
        return words

    def _stored_cut(self, b) -> list[list[str]] | None:
        """The title's and main text's words as the write cut them: the tokens stored with the memory's content
        moments, which the turn read with its candidates (jieba cutting a memory new to the process again was 1 ms
        of a turn's admission; design §23). None where they cannot stand for the whole text: a moment stored for
        another version of it, or one long enough to be a piece of a sentence cut inside a word (``SHORT_MOMENT``)."""
        moments = [m for m in build_moments(b) if not m.context_only]
        if not moments or any(len(m.text) > SHORT_MOMENT for m in moments):
            return None
        got = self.store.moment_tokens(b.space, [m.id for m in moments])
        cut = []
        for m in moments:
            text, tokens = got.get(m.id, (None, None))
            if text != m.text:
                return None
            cut.append(tokens)
        return cut

    def admission_model(self, model_id: str) -> AdmissionModel | None:
        """The fitted admission for this embedder, or None (lexical-only admission, with a warning once)."""
        model = self.cfg.retrieval.admission.models.get(model_id)
        if model is None and model_id not in self._warned:
            self._warned.add(model_id)
            log.warning("embedding model %s has no fitted admission (retrieval.admission.models): direct recall "
                        "admits on lexical evidence only; run `ombre-brain calibrate` on labelled data to fit one",
                        model_id)
        return model

    def _sample(self, space: str) -> tuple | None:
        """(moment ids, their e5 vectors, whether each one's memory is written in CJK, and (bucket ids, matrix,
        CJK flags) of those memories' whole second-opinion vectors, or None) of the space's background sample."""
        n = len(self.store.lexical(space))
        with self._lock:
            hit = self._samples.get(space)
        if hit is not None and (hit[0] == n or (len(hit[1][0]) >= BACKGROUND_SAMPLE and abs(n - hit[0]) <= n * 0.1)):
            return hit[1]
        got = self.store.sample_moments(space, BACKGROUND_SAMPLE)
        if got is None or len(got[0]) < MIN_BACKGROUND:
            return None
        buckets = self.store.get_many(space, {bucket_id_of(m) for m in got[0]})
        ids = [m for m in got[0] if bucket_id_of(m) in buckets]
        matrix = got[1][[i for i, m in enumerate(got[0]) if bucket_id_of(m) in buckets]]
        cjk = [bucket_is_cjk(buckets[bucket_id_of(m)]) for m in ids]  # each moment by its memory's script
        stacked = None
        if self.store.second is not None:  # the sampled moments' memories, each as a whole (see _wholes)
            wholes = self._wholes(space, list(buckets.values()))
            stacked = (list(wholes), np.stack(list(wholes.values())),
                       [bucket_is_cjk(buckets[b]) for b in wholes]) if wholes else None
        sample = (ids, matrix, cjk, stacked)
        with self._lock:
            self._samples[space] = (n, sample)
        return sample

    def clear_cache(self) -> None:
        """Forget the sampled background vectors, the memories' words and texts and the dictionary's pairs of words (a
        purge: all come from memory text)."""
        with self._lock:
            self._samples.clear()
            self._words.clear()
            self._pairs.clear()
        self.reading.clear_cache()
        held_types.cache_clear()
        admission.clear_cache()


__all__ = ["Admitter", "thaw"]
