"""The dream engine: dreams from recent material, resonance, surfacing once, rings (design §4, issue 6).

A dream lives through three calls, one method each:

- :meth:`DreamEngine.run` (``Brain.dream``, ``ombre-brain dream run``) picks material from the
  recent window plus one older echo and stores a ``dream`` bucket, composed by the configured
  LLM or, without one (or when it fails), as an extractive collage that never invents facts.
- :meth:`DreamEngine.surface` runs inside every turn: it scores each latent dream's resonance
  with the turn, surfaces the best one above ``dream.surface_threshold`` in the Dream section,
  and counts near misses; a dream is dropped after ``dream.max_attempts`` of them.
- :meth:`DreamEngine.after_surfaced` adds ``dream_ring`` edges from a surfaced dream to its
  sources, so later diffusion can walk them (chain-only, per the layer table).

The ledger table ``dream_state`` is the truth about where a dream is (latent, surfaced,
dropped) and how many attempts it has had. The bucket's ``surfaced`` and ``surface_attempts``
fields mirror it, rewritten metadata-only (never re-embedded) in the same transaction. Surfacing
is claimed by one conditional UPDATE inside a ledger write transaction, so two turns (threads or
processes) can never both surface a dream; dry runs score but never claim or count.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from ..buckets import Bucket, bucket_id_of, validate_space
from ..config import Config, DreamConfig, favorite_tags
from ..gateway.upstream import completion_text
from ..memory_layers import SOURCE_TAGS, WEATHER_TAGS, infer_layer
from ..recall_types import QueryPlan, SessionState
from ..store.interfaces import Dreaming, ListRead
from ..text import has_cjk, is_cjk_text
from ..timeutil import now_utc, parse_time
from .compose import (
    Material,
    Resonance,
    calibrated_cosine,
    choose_echo,
    choose_material,
    clean_llm_text,
    collage,
    core_affect,
    dream_title,
    llm_messages,
    query_affect,
    recall_cues,
    resonance,
)

log = logging.getLogger("ombre_brain")

SCHEMA = """
CREATE TABLE IF NOT EXISTS dream_state (
    space TEXT NOT NULL,
    dream_id TEXT NOT NULL,
    state TEXT NOT NULL,                 -- latent | surfaced | dropped
    attempts INTEGER NOT NULL DEFAULT 0, -- near misses counted so far
    composer TEXT NOT NULL,              -- llm | collage | external (written through the API)
    created TEXT NOT NULL,
    claimed_at TEXT,
    session TEXT,                        -- the session whose turn surfaced it
    ringed INTEGER NOT NULL DEFAULT 0,   -- dream_ring edges added
    PRIMARY KEY (space, dream_id)
);
CREATE INDEX IF NOT EXISTS dream_state_state ON dream_state(space, state);
"""

RING_CONFIDENCE = 0.9
NO_MATERIAL_LAYERS = frozenset({"source_record", "dream", "archive", "letter", "plan", "self_model"})
TZ_SLACK = timedelta(hours=28)  # stored times keep their own offsets; string-compared windows are widened by this
ECHO_LEXICAL_K = 60
ECHO_SCAN = 300



@dataclass(frozen=True)
class DreamRun:
    """What one dream run did: the new dream's id, or None with the reason."""

    dream_id: str | None
    reason: str  # dreamed | too_little_material | probability | no_new_material
    message: str
    composer: str | None = None
    material: tuple[Material, ...] = ()
    echo: Material | None = None

    def to_dict(self) -> dict:
        return {"dream_id": self.dream_id, "reason": self.reason, "message": self.message, "composer": self.composer,
                "material": [m.to_dict() for m in self.material],
                "echo": self.echo.to_dict() if self.echo is not None else None}


def ensure_tables(ledger) -> None:
    ledger.ensure_schema("dream", SCHEMA)


class DreamEngine:
    """Composes, surfaces and rings the dreams of every space in one Brain; safe under concurrent turns."""

    LATENT = ListRead(type="dream", limit=None)  # what latent() lists; a turn announces this very read ahead

    def __init__(self, *, config: Config, store: Dreaming, write: Callable[..., str], plan: Callable[[str], QueryPlan],
                 upstream: Callable[[], Any]) -> None:
        self.config = config
        self.store = store
        self.ledger = store.ledger
        self.write = write          # Brain.write: a dream is stored like any bucket
        self.plan = plan            # RecallPolicy.plan_query, for inspect()
        self.upstream = upstream    # the gateway's upstream client, made only when the LLM composer runs
        ensure_tables(self.ledger)
        self._cue_cache: dict[tuple[str, str], tuple[tuple[str, ...], np.ndarray]] = {}
        self._lock = threading.Lock()

    @property
    def cfg(self) -> DreamConfig:
        return self.config.dream

    def tokenize(self, text: str) -> list[str]:
        return self.store.tokens(text)

    # ------------------------------------------------------------ dreaming

    def dream(self, space: str, now: datetime | None = None) -> str | None:
        """Compose and store one dream; its id, or None (the reason is logged)."""
        return self.run(space, now=now).dream_id

    def run(self, space: str, now: datetime | str | None = None, window_hours: float | None = None) -> DreamRun:
        """One dream run with its report (the CLI prints it); ``window_hours`` overrides ``dream.window_hours``."""
        validate_space(space)
        now = parse_time(now, "now") if now is not None else now_utc()
        cfg = self.cfg
        window = cfg.window_hours if window_hours is None else float(window_hours)
        if cfg.probability < 1.0:
            draw = random.Random(f"{space}|{now.isoformat()}").random()  # reproducible for a given --now
            if draw >= cfg.probability:
                return self._said(space, DreamRun(None, "probability",
                                                  f"no dream this time: drew {draw:.3f} against dream.probability "
                                                  f"{cfg.probability:g}"))
        recent = self._recent(space, now, window)
        material = choose_material(recent, now, window, cfg.max_material)
        if len(material) < cfg.min_material:
            return self._said(space, DreamRun(
                None, "too_little_material",
                f"too little material: {len(recent)} memories in the last {window:g} h, and "
                f"dream.min_material is {cfg.min_material}; nothing was written"))
        echo = self._echo(space, material, now, window)
        sources = [m.bucket for m in material] + ([echo.bucket] if echo is not None else [])
        ids = [b.id for b in sources]
        if self._last_sources(space) == set(ids):
            return self._said(space, DreamRun(None, "no_new_material",
                                              "the latest dream was made from exactly this material; nothing was "
                                              "written", material=tuple(material), echo=echo))
        cues = recall_cues(sources, self.tokenize, cfg.max_cues, exclude=self._structural_tags())
        limit = self._token_limit()
        text, composer = self._compose(material, echo, cues, limit)
        affect = core_affect(sources)
        dream_id = self.write(
            space, now=now, dedupe=False, type="dream", title=dream_title(cues, is_cjk_text(text)), body=text,
            tags=["dream"], importance=max(1, min(10, round(sum(b.importance for b in sources) / len(sources)))),
            valence=affect["valence"], arousal=affect["arousal"], core_affect=affect, recall_cues=cues,
            source_bucket_ids=ids, surfaced=False, surface_attempts=0, origin="derived", basis="inferred",
            memory_classification_source="default", created=now.isoformat())
        with self.ledger.tx() as c:
            c.execute("INSERT INTO dream_state(space, dream_id, state, attempts, composer, created) "
                      "VALUES (?,?,'latent',0,?,?) ON CONFLICT(space, dream_id) DO UPDATE SET state = 'latent', "
                      "attempts = 0, composer = excluded.composer, created = excluded.created, claimed_at = NULL, "
                      "session = NULL, ringed = 0", (space, dream_id, composer, now.isoformat()))
        msg = f"dreamed {dream_id} in {space} from {len(sources)} memories ({composer})"
        log.info("dream: %s", msg)
        return DreamRun(dream_id, "dreamed", msg, composer, tuple(material), echo)

    @staticmethod
    def _said(space: str, run: DreamRun) -> DreamRun:
        log.info("dream: %s: %s", space, run.message)
        return run

    def _layer_ok(self, bucket: Bucket) -> bool:
        """May this bucket feed a dream? Not a layer that never dreams, nor a memory never to surface, nor an
        anchor (a coordinate surfaces only when asked for)."""
        return not (bucket.dont_surface or bucket.anchor) and \
            infer_layer(bucket, self.config).layer not in NO_MATERIAL_LAYERS

    def _recent(self, space: str, now: datetime, window: float) -> list[Bucket]:
        """Buckets created or active in the window (and not after ``now``) that may feed a dream."""
        start = now - timedelta(hours=window)
        out = []
        for b in self.store.list(space, limit=1000, since=(start - TZ_SLACK).isoformat()):
            times = [t for t in (b.created_dt(), b.last_active_dt()) if t <= now]
            if b.created_dt() <= now and times and max(times) >= start and self._layer_ok(b):
                out.append(b)
        return out

    def _echo(self, space: str, material: Sequence[Material], now: datetime, window: float) -> Material | None:
        """One older bucket sharing tags or topic terms with the material (found lexically, then by scan)."""
        store = self.store
        start = now - timedelta(hours=window)
        mat = [m.bucket for m in material]
        mat_ids = {b.id for b in mat}
        tokens = list(dict.fromkeys(t for b in mat for t in self.tokenize(f"{b.title} {' '.join(b.tags)}")))
        lexical: dict[str, float] = {}
        for moment_id, score in store.lexical_search(space, tokens, ECHO_LEXICAL_K).items():
            bid = bucket_id_of(moment_id)
            lexical[bid] = max(lexical.get(bid, 0.0), float(score))
        pool = dict(store.get_many(space, lexical))
        for b in store.list(space, limit=ECHO_SCAN):
            pool.setdefault(b.id, b)
        older = [(b, lexical.get(b.id, 0.0)) for b in pool.values()
                 if b.id not in mat_ids and b.created_dt() < start and b.last_active_dt() <= now and self._layer_ok(b)]
        older.sort(key=lambda x: x[0].id)
        return choose_echo(older, mat, frozenset(t.lower() for t in tokens), self.tokenize)

    def _last_sources(self, space: str) -> set[str] | None:
        last = self.store.list(space, type="dream", limit=1)
        return set(last[0].source_bucket_ids) if last else None

    def _structural_tags(self) -> frozenset[str]:
        return frozenset(SOURCE_TAGS | WEATHER_TAGS | favorite_tags(self.config) | {"dream"})

    def _token_limit(self) -> int:
        """Dreams are composed to fit the Dream section, so the gateway never has to cut one."""
        budget = self.config.gateway.budgets.dream
        return max(24, int(budget * 0.9)) if budget > 0 else 180

    def _compose(self, material: Sequence[Material], echo: Material | None, cues: Sequence[str],
                 limit: int) -> tuple[str, str]:
        config = self.config
        if self.cfg.llm and config.upstream.base_url:
            payload: dict[str, Any] = {"messages": llm_messages(self.cfg.prompt, material, echo, cues, limit),
                                       "temperature": 0.9, "max_tokens": limit * 2, "stream": False}
            if config.upstream.model:
                payload["model"] = config.upstream.model
            try:
                text = clean_llm_text(completion_text(self.upstream().chat(payload)), limit)
            except Exception as exc:  # any LLM failure falls back to the collage; a dream run never breaks on it
                log.warning("dream: the LLM composer failed (%s); composing from fragments instead",
                            getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}")
            else:
                if text:
                    return text, "llm"
                log.warning("dream: the LLM composer answered nothing usable; composing from fragments instead")
        return collage(material, echo, cues, limit), "collage"

    # ------------------------------------------------------------ resonance and surfacing

    def scorer(self, space: str, plan: QueryPlan, taken: set[str]) -> Callable[[Bucket], Resonance]:
        """This turn's resonance with a dream: by feeling (the query's own, or what it recalled) and by cue."""
        need_recalled = taken and (plan.query_valence is None or plan.query_arousal is None)
        recalled = list(self.store.get_many(space, taken).values()) if need_recalled else []
        q_aff = query_affect(plan.query_valence, plan.query_arousal, recalled)
        cosine = self._cosine(space, plan.query)

        def score(b: Bucket) -> Resonance:
            return resonance(plan.query, b.recall_cues, b.core_affect or {"valence": b.valence, "arousal": b.arousal},
                             q_aff, lambda: cosine(b))

        return score

    def latent(self, space: str) -> list[tuple[Bucket, int]]:
        """Latent dreams of the space with their attempt counts; dreams written through the API are adopted."""
        dreams = self.store.list(space, **self.LATENT.kwargs())
        if not dreams:
            return []
        states = self._states(space, [b.id for b in dreams])
        out = []
        for b in dreams:
            st = states.get(b.id)
            if st is None:
                if b.surfaced or (b.surface_attempts or 0) >= self.cfg.max_attempts:
                    continue
                out.append((b, b.surface_attempts or 0))
            elif st[0] == "latent":
                out.append((b, st[1]))
        out.sort(key=lambda x: x[0].id)
        return out

    def _states(self, space: str, ids: list[str]) -> dict[str, tuple[str, int]]:
        found: dict[str, tuple[str, int]] = {}
        for i in range(0, len(ids), 500):
            among, chunk = self.ledger.dialect.among("dream_id", ids[i:i + 500])
            for r in self.ledger.query(f"SELECT dream_id, state, attempts FROM dream_state WHERE space = ? AND {among}",
                                       (space, *chunk)):
                found[r["dream_id"]] = (r["state"], int(r["attempts"]))
        return found

    def _cosine(self, space: str, query: str):
        """A per-turn function: a dream's (raw, calibrated) best cue cosine, or None when it says nothing."""
        emb = self.store.embedder
        text = query.strip()
        readable = bool(text) and (emb.cjk_capable or not is_cjk_text(text))
        qvec: list[np.ndarray] = []

        def best(bucket: Bucket) -> tuple[float, float] | None:
            cues = tuple(c for c in bucket.recall_cues if emb.cjk_capable or not has_cjk(c))
            if not readable or not cues:
                return None
            if not qvec:
                qvec.append(emb.query(text))
            raw = float(np.max(self._cue_vectors(space, bucket.id, cues) @ qvec[0]))
            return raw, calibrated_cosine(raw, emb.backend)

        return best

    def _cue_vectors(self, space: str, dream_id: str, cues: tuple[str, ...]) -> np.ndarray:
        key = (space, dream_id)
        with self._lock:
            hit = self._cue_cache.get(key)
        if hit is not None and hit[0] == cues:
            return hit[1]
        vecs = np.asarray(self.store.embedder.passages(list(cues)), dtype=np.float32)
        with self._lock:
            self._cue_cache[key] = (cues, vecs)
        return vecs

    # ------------------------------------------------------------ the ledger: claims, attempts, rings

    def _adopt(self, c, space: str, bucket: Bucket) -> None:
        """Give a dream written through the API its ledger row, from its own fields."""
        attempts = bucket.surface_attempts or 0
        st = "surfaced" if bucket.surfaced else "dropped" if attempts >= self.cfg.max_attempts else "latent"
        c.execute("INSERT INTO dream_state(space, dream_id, state, attempts, composer, created) "
                  "VALUES (?,?,?,?,'external',?) ON CONFLICT DO NOTHING",
                  (space, bucket.id, st, attempts, bucket.created))

    def _bucket_lock(self, space: str, dream_id: str):
        """The store's per-bucket lock, so a mirror never races an edit of the same dream."""
        return self.store.bucket_lock(space, [dream_id])

    def _mirror(self, c, space: str, dream_id: str) -> None:
        """Copy the ledger's state into the bucket's surfaced / surface_attempts, metadata only."""
        st = c.execute("SELECT state, attempts FROM dream_state WHERE space = ? AND dream_id = ?",
                       (space, dream_id)).fetchone()
        if st is not None:
            self.store.rewrite_metadata(space, dream_id, {"surfaced": st["state"] == "surfaced",
                                                          "surface_attempts": int(st["attempts"])}, conn=c)

    def claim(self, space: str, bucket: Bucket, state: SessionState) -> bool:
        """Win the right to surface a dream: one conditional UPDATE; only one turn ever sees rowcount 1."""
        with self._bucket_lock(space, bucket.id), self.ledger.tx() as c:
            self._adopt(c, space, bucket)
            won = c.execute("UPDATE dream_state SET state = 'surfaced', claimed_at = ?, session = ? "
                            "WHERE space = ? AND dream_id = ? AND state = 'latent'",
                            (state.now.isoformat(), state.session, space, bucket.id)).rowcount == 1
            if won:
                self._mirror(c, space, bucket.id)
        if won:
            log.info("dream: %s surfaced in %s (session %s)", bucket.id, space, state.session)
        return won

    def count_attempt(self, space: str, bucket: Bucket) -> tuple[int, str]:
        """One more near miss; the dream is dropped at max_attempts. Returns (attempts, state)."""
        with self._bucket_lock(space, bucket.id), self.ledger.tx() as c:
            self._adopt(c, space, bucket)
            c.execute("UPDATE dream_state SET attempts = attempts + 1 WHERE space = ? AND dream_id = ? "
                      "AND state = 'latent'", (space, bucket.id))
            c.execute("UPDATE dream_state SET state = 'dropped' WHERE space = ? AND dream_id = ? AND state = 'latent' "
                      "AND attempts >= ?", (space, bucket.id, self.cfg.max_attempts))
            row = c.execute("SELECT state, attempts FROM dream_state WHERE space = ? AND dream_id = ?",
                            (space, bucket.id)).fetchone()
            self._mirror(c, space, bucket.id)
        if row["state"] == "dropped":
            log.info("dream: %s in %s dropped after %d near misses", bucket.id, space, row["attempts"])
        return int(row["attempts"]), row["state"]

    def after_surfaced(self, space: str, dream_ids: Iterable[str], now: datetime,
                       trimmed: Iterable[str] = ()) -> None:
        """After a real turn: ring each shown dream to its sources; release claims the budget trimmed away."""
        for dream_id in trimmed:
            self._release(space, dream_id)
        store = self.store
        for dream_id in dream_ids:
            b = store.get(space, dream_id)
            if b is None:
                continue
            live = store.get_many(space, b.source_bucket_ids)
            for src in b.source_bucket_ids:
                if src in live and src != dream_id:
                    store.add_edge(space, dream_id, src, "dream_ring", RING_CONFIDENCE)
            with self.ledger.tx() as c:
                c.execute("UPDATE dream_state SET ringed = 1 WHERE space = ? AND dream_id = ?", (space, dream_id))

    def _release(self, space: str, dream_id: str) -> None:
        """Give back a claim whose dream never reached the prompt (trimmed by the total budget)."""
        with self._bucket_lock(space, dream_id), self.ledger.tx() as c:
            released = c.execute("UPDATE dream_state SET state = 'latent', claimed_at = NULL, session = NULL "
                                 "WHERE space = ? AND dream_id = ? AND state = 'surfaced' AND ringed = 0",
                                 (space, dream_id)).rowcount
            if released:
                self._mirror(c, space, dream_id)
        if released:
            log.info("dream: %s in %s was trimmed from the prompt; it stays latent", dream_id, space)

    # ------------------------------------------------------------ inspection and forgetting

    def inspect(self, space: str, query: str = "", now: datetime | None = None) -> list[dict]:
        """Every dream of the space with its state and its resonance to ``query`` (nothing is claimed)."""
        validate_space(space)
        plan = self.plan(query)
        q_aff = query_affect(plan.query_valence, plan.query_arousal, [])
        cosine = self._cosine(space, plan.query)
        states = {r["dream_id"]: dict(r) for r in self.ledger.query(
            "SELECT dream_id, state, attempts, composer, claimed_at, session, ringed FROM dream_state WHERE space = ?",
            (space,))}
        out = []
        for b in self.store.list(space, type="dream", limit=1000):
            st = states.get(b.id) or {"state": "surfaced" if b.surfaced else "latent",
                                      "attempts": b.surface_attempts or 0, "composer": "external"}
            res = resonance(plan.query, b.recall_cues, b.core_affect or {}, q_aff, lambda b=b: cosine(b))
            age_h = ((now or now_utc()) - b.created_dt()).total_seconds() / 3600
            out.append({"bucket": b.to_dict(), **st, "age_hours": round(age_h, 2), "resonance": res.to_dict()})
        return out

    def on_purge(self, space: str, bucket_ids: list[str], digests: list[str], whole_space: bool) -> int:
        """Forget ledger rows and cached cue vectors of purged dreams (their buckets are counted by forget)."""
        with self.ledger.tx() as c:
            if whole_space:
                c.execute("DELETE FROM dream_state WHERE space = ?", (space,))
            else:
                for i in range(0, len(bucket_ids), 500):
                    chunk = bucket_ids[i:i + 500]
                    c.execute(f"DELETE FROM dream_state WHERE space = ? AND dream_id IN ({','.join('?' * len(chunk))})",
                              (space, *chunk))
        gone = set(bucket_ids)
        with self._lock:
            for key in [k for k in self._cue_cache if k[0] == space and (whole_space or k[1] in gone)]:
                del self._cue_cache[key]
        return 0

    def clear_cache(self) -> None:
        with self._lock:
            self._cue_cache.clear()


__all__ = ["DreamEngine", "DreamRun"]
