"""The writer: run the write decision on one exchange and write its drafts as buckets.

The decision is the configured extractor (``ingest.extractor``): ``rule`` (cue words, :mod:`.rules`)
or ``llm`` (the upstream model, :mod:`.extractor`). Each draft becomes one bucket through
``Brain.write`` (validation, writer hints and the suppression check included), with an id derived
from the exchange's (so a crash after writing and before the job is marked done cannot duplicate
memory on retry) and ``source: exchange:<id>`` (so forgetting the exchange forgets what it wrote).
A draft identical to a stored memory joins it as one more source instead of a copy.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..config import Config
from ..errors import DuplicateError, SourceSuppressedError, UpstreamError, ValidationError
from ..store.claims import CONTENT_FIELDS
from ..text import message_text
from .drafts import Draft
from .exchange import Exchange
from .extractor import EXTRACTOR_PROMPT, parse_extraction
from .rules import rule_drafts

__all__ = ["Writer", "bucket_id_for"]


def bucket_id_for(exchange_id: str, side: str) -> str:
    """The id a draft of this exchange is written under: the same on every retry of the job."""
    return f"x{exchange_id[:12]}{side}"


class Writer:
    """The write decision and the writes, for one config; ``write`` is Brain.write."""

    def __init__(self, config: Config, write: Callable[..., str], upstream: Callable[[], object]) -> None:
        self.config = config
        self.write = write
        self._upstream = upstream  # built on first use: only the llm extractor talks to it
        self.extractor = config.ingest.extractor

    def drafts(self, ex: Exchange) -> list[Draft]:
        """The write decision on one exchange: what to remember, as drafts ([] for noise)."""
        if self.extractor == "llm":
            return self._llm_drafts(ex)
        return rule_drafts(ex.user, self.config.writer)

    def run(self, ex: Exchange) -> dict:
        """Decide and write; the job's result ``{bucket_ids, noise, extractor}`` (``suppressed`` when the exchange
        was forgotten before it was written)."""
        drafts = self.drafts(ex)
        written: list[str] = []
        for d in drafts:
            bid = bucket_id_for(ex.id, d.side)
            fields = dict(d.fields)
            fields["body"] = fields["body"][: self.config.store.max_body_chars]
            where = {"space": ex.space, "id": bid, "source": f"exchange:{ex.id}", "created": ex.at or None}
            try:
                try:
                    written.append(self.write(**where, **fields))
                except DuplicateError:  # stored already, with other values: the exchange joins its sources,
                    # and the stored values (perhaps the user's own) stay rather than the extractor's guesses
                    written.append(self.write(**where, **{k: fields[k] for k in CONTENT_FIELDS if k in fields}))
            except SourceSuppressedError:
                return {"bucket_ids": written, "suppressed": True, "extractor": self.extractor}
            except ValidationError as exc:
                if exc.code != "duplicate_id":
                    raise
                written.append(bid)  # written by an attempt that crashed before marking the job done
        return {"bucket_ids": written, "noise": not drafts, "extractor": self.extractor}

    def _llm_drafts(self, ex: Exchange) -> list[Draft]:
        model = self.config.upstream.model or ex.model
        if not model:
            raise UpstreamError("the LLM extractor needs a model: set upstream.model", code="upstream_no_model")
        exchange = json.dumps({"user": ex.user, "assistant": ex.reply}, ensure_ascii=False)
        data = self._upstream().chat({"model": model, "temperature": 0, "stream": False, "messages": [
            {"role": "system", "content": EXTRACTOR_PROMPT}, {"role": "user", "content": exchange}]})
        try:
            content = message_text(data["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError):
            raise UpstreamError("extractor answer has no choices[0].message.content",
                                code="upstream_bad_body") from None
        return parse_extraction(content)
