"""The writer: run the write decision on one exchange and write its drafts as buckets.

The decision is the configured extractor (``ingest.extractor``): ``model`` (the learned decision,
:mod:`.learned`; the default), ``rule`` (cue words, :mod:`.rules`) or ``llm`` (the upstream model,
:mod:`.extractor`). Whichever decides, a message asking not to be kept is never stored, and one that says
only that forgets what the session's previous exchange wrote (a purge of its source, named in the result).

Each draft becomes one bucket through ``Brain.write`` (validation, writer hints and the suppression check
included), with an id derived from the exchange's (so a crash after writing and before the job is marked
done cannot duplicate memory on retry) and ``source: exchange:<id>`` (so forgetting the exchange forgets
what it wrote). A draft that repeats a stored memory joins it as one more source claim, and one that
updates it is written apart and linked to it (:mod:`.joining`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..buckets import Bucket
from ..config import Config
from ..errors import DuplicateError, SourceSuppressedError, UpstreamError, ValidationError
from ..store.claims import CONTENT_FIELDS
from ..text import message_text
from .decision import Verdict
from .drafts import Draft
from .exchange import Exchange
from .extractor import EXTRACTOR_PROMPT, parse_extraction
from .features import Encoders
from .joining import Join, find_join, own_words
from .learned import LearnedDecision
from .rules import rule_drafts
from .signals import compiled, dont_keep

log = logging.getLogger("ombre_brain")

__all__ = ["Decision", "WriteParts", "Writer", "bucket_id_for"]

SIMILAR_K = 5  # stored memories compared with each draft for a repeat or an update


def bucket_id_for(exchange_id: str, side: str) -> str:
    """The id a draft of this exchange is written under: the same on every retry of the job."""
    return f"x{exchange_id[:12]}{side}"


@dataclass(frozen=True)
class WriteParts:
    """What the writer uses of the Brain, as plain callables: it never holds the Brain itself."""

    write: Callable[..., str]                                          # Brain.write
    upstream: Callable[[], object] = lambda: None                      # the upstream client, built on first use
    encoders: Callable[[], Encoders] | None = None                     # the store's embedder and second opinion
    similar: Callable[[str, str, int], list[Bucket]] | None = None     # stored memories most like a text
    link: Callable[..., object] | None = None                          # Brain.link
    purge: Callable[..., dict] | None = None                           # Brain.purge
    written: Callable[[str], object] | None = None                     # after an exchange's writes (the space)


@dataclass(frozen=True)
class Decision:
    """The write decision on one exchange: its drafts, which extractor decided, and the verdict when it has one."""

    drafts: list[Draft]
    extractor: str
    verdict: Verdict | None = None
    notes: dict[str, Any] = field(default_factory=dict)


class Writer:
    """The write decision and the writes, for one config."""

    def __init__(self, config: Config, parts: WriteParts) -> None:
        self.config = config
        self.parts = parts
        self.write = parts.write
        self.extractor = config.ingest.extractor
        self.sig = compiled(config.writer.signals)
        self.learned = LearnedDecision(config, parts.encoders) if parts.encoders is not None else None

    def decide(self, ex: Exchange) -> Decision:
        """The write decision on one exchange: what to remember, as drafts ([] for noise)."""
        asks, only = dont_keep(ex.user, self.sig)
        if asks:  # a rule over every extractor: what the user asks not to keep is never kept
            return Decision([], self.extractor, Verdict(None, False, only, "dont_keep_previous" if only
                                                        else "dont_keep"))
        if self.extractor == "llm":
            return Decision(self._llm_drafts(ex), "llm")
        if self.extractor == "model" and self.learned is not None and self.learned.ready():
            drafts, verdict = self.learned.drafts(ex)
            return Decision(drafts, "model", verdict)
        return Decision(rule_drafts(ex.user, self.config.writer), "rule")

    def drafts(self, ex: Exchange) -> list[Draft]:
        return self.decide(ex).drafts

    def run(self, ex: Exchange) -> dict:
        """Decide and write; the job's result ``{bucket_ids, noise, extractor}``, with ``decision`` (the verdict),
        ``joined`` / ``updates`` (stored memories it repeated or updated), ``forgot`` (the previous exchange it
        forgot) and ``suppressed`` (the exchange was forgotten before it was written) when they apply."""
        d = self.decide(ex)
        result: dict[str, Any] = {"bucket_ids": [], "noise": not d.drafts, "extractor": d.extractor}
        if d.verdict is not None:
            result["decision"] = d.verdict.to_dict()
            if d.verdict.forget_previous:
                result["forgot"] = self._forget_previous(ex)
        for draft in d.drafts:
            try:
                bid, join = self._write_draft(ex, draft)
            except SourceSuppressedError:
                result["suppressed"] = True
                return result
            if bid not in result["bucket_ids"]:  # two drafts that join one memory name it once
                result["bucket_ids"].append(bid)
            if join is not None:
                result.setdefault("joined" if join.kind == "repeat" else "updates", []).append(join.bucket.id)
        if result["bucket_ids"] and self.parts.written is not None:
            self.parts.written(ex.space)
        return result

    # -- writing one draft

    def _write_draft(self, ex: Exchange, d: Draft) -> tuple[str, Join | None]:
        fields = dict(d.fields)
        fields["body"] = fields["body"][: self.config.store.max_body_chars]
        where = {"space": ex.space, "id": bucket_id_for(ex.id, d.side), "source": f"exchange:{ex.id}",
                 "created": ex.at or None}
        join = self._join(ex.space, d, fields)
        if join is not None and join.kind == "repeat":  # one more claim on the stored memory; its text stays
            return self.write(**where, **{k: getattr(join.bucket, k) for k in CONTENT_FIELDS}), join
        try:
            try:
                bid = self.write(**where, **fields)
            except DuplicateError:  # stored already, with other values: the exchange joins its sources,
                # and the stored values (perhaps the user's own) stay rather than the extractor's guesses
                bid = self.write(**where, **{k: fields[k] for k in CONTENT_FIELDS if k in fields})
        except ValidationError as exc:
            if exc.code != "duplicate_id":
                raise
            bid = where["id"]  # written by an attempt that crashed before marking the job done
        if join is not None and self.parts.link is not None and bid != join.bucket.id:
            self.parts.link(ex.space, bid, join.bucket.id, "old_version", 0.8)
        return bid, join

    def _join(self, space: str, d: Draft, fields: dict) -> Join | None:
        if self.parts.similar is None or not d.layer:
            return None
        words = own_words(fields["body"])
        return find_join(words, d.layer, self.parts.similar(space, words, SIMILAR_K), self.config.writer.model)

    def _forget_previous(self, ex: Exchange) -> dict:
        """Forget what the session's previous exchange wrote: a purge of its source; the receipt's gist."""
        if ex.previous is None:
            return {"source": None, "note": "the messages do not hold the exchange before this one"}
        source = f"exchange:{ex.previous}"
        if self.parts.purge is None:
            return {"source": source, "note": "forgetting is not available here"}
        payload = self.parts.purge(ex.space, source=source).get("payload", {})
        return {"source": source, "purge_id": payload.get("purge_id"), "deleted": payload.get("deleted"),
                "released": payload.get("released") or []}

    # -- the llm extractor

    def _llm_drafts(self, ex: Exchange) -> list[Draft]:
        model = self.config.upstream.model or ex.model
        if not model:
            raise UpstreamError("the LLM extractor needs a model: set upstream.model", code="upstream_no_model")
        exchange = json.dumps({"user": ex.user, "assistant": ex.reply}, ensure_ascii=False)
        data = self.parts.upstream().chat({"model": model, "temperature": 0, "stream": False, "messages": [
            {"role": "system", "content": EXTRACTOR_PROMPT}, {"role": "user", "content": exchange}]})
        try:
            content = message_text(data["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError):
            raise UpstreamError("extractor answer has no choices[0].message.content",
                                code="upstream_bad_body") from None
        return parse_extraction(content)
