"""``letter_write``, ``letter_read``, ``letter_lock_update``: letters under a side's lock (design §19).

MCP is the companion's channel: every letter written here is locked (when locked) by the
``companion``, and every read is the companion's, whatever ``author`` says (a signature only). A
letter the person locked shows here as metadata until its time (timed) or never (permanent);
the person reads and locks letters through ``/v1/letters``. A token bound to the person
(``server.tokens[].side: person``) is refused by these three tools. Each reply quotes a letter's
words as memory text is quoted: under the framing line, never as instructions.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..kinds.letterbox import LetterRead
from .access import Call
from .format import Reply, quote
from .registry import Int, Space, tool

__all__ = ["letter_lock_update", "letter_read", "letter_write"]

LOCK = Annotated[str, Field(description="none, timed (with unlock_date) or permanent")]
WHEN = Annotated[str, Field(description="for timed: when it opens, ISO-8601 with offset, in the future")]


def _line(r: LetterRead) -> str:
    m = r.meta
    lock = m["lock_type"] + (f" until {m['unlock_at']}" if m["lock_type"] == "timed" else "")
    state = "opened" if m["opened"] else "sealed" if m["sealed"] else "open"
    who = f"by {m['author']}" if m.get("author") else ""
    holder = m["locked_by"] or "no one"
    return (f"- {m['letter_id']} · {m['created'][:16]} · {who} · lock {lock} ({state}, held by {holder})"
            + (f" · {quote(r.bucket.title)}" if r.readable else " · metadata only: the lock belongs to the "
               f"{m['locked_by']}"))


def _letters_text(call: Call, rows: list[LetterRead]) -> str:
    blocks = ["\n".join(_line(r) for r in rows)] if rows else []
    whole = [r for r in rows if r.readable]
    if whole:
        quoted = [call.config.render.framing_line]
        for r in whole:
            quoted += [f"> [{r.meta['letter_id']}] {r.bucket.title}", *(f"> {line}" for line in
                                                                      r.bucket.body.splitlines() or [""]), ""]
        blocks.append("\n".join(quoted).rstrip())
    return "\n\n".join(blocks)


@tool("""Write a letter (kept whole, never decays or merges). lock_type none, timed (opens at unlock_date) or
      permanent: the lock is yours (the companion's); the person sees only its metadata until it opens. The lock is
      an application boundary, not encryption.""")
def letter_write(
    call: Call,
    author: Annotated[str, Field(description="the signature (a name, or 'ai' / 'user'); the lock is yours whatever "
                                             "it says")],
    content: Annotated[str, Field(description="the letter, verbatim")],
    user_name: str = "",
    title: str = "",
    date: Annotated[str, Field(description="the date written on the letter, as written")] = "",
    ai_name: str = "",
    lock_type: LOCK = "none",
    unlock_date: WHEN = "",
    space: Space = None,
) -> Reply:
    space = call.space(space)
    side = call.access.side()
    letter = call.brain.letters.write(space, side, content=content, title=title, author=author, user_name=user_name,
                                      ai_name=ai_name, date=date, lock_type=lock_type, unlock_date=unlock_date)
    read = call.brain.letters.get(space, side, letter.id)
    m = read.meta
    lock = "open (no lock)" if m["lock_type"] == "none" else (
        f"locked by the companion until {m['unlock_at']}" if m["lock_type"] == "timed"
        else "locked by the companion for good (permanent)")
    text = (f"letter kept → {letter.id} · space {space} · {quote(letter.title)} · by {m['author']} · {lock}. "
            "It never reaches a prompt, a dream or a search; letter_read shows it.")
    return Reply(text, {"tool": "letter_write", "space": space, "side": side, **read.to_dict()})


@tool("""Read letters, newest first, or those matching query. Your own locked letters and open ones read whole; a
      letter the person locked shows only its metadata (no title, no words) until its time comes.""",
      read_only=True)
def letter_read(
    call: Call,
    query: Annotated[str, Field(description="words to look for (only in letters you may read)")] = "",
    limit: Annotated[Int, Field(description="1-100")] = 10,
    author: Annotated[str, Field(description="'user' / 'ai', or a signature")] = "",
    date_from: Annotated[str, Field(description="YYYY-MM-DD, inclusive")] = "",
    date_to: Annotated[str, Field(description="YYYY-MM-DD, inclusive")] = "",
    space: Space = None,
) -> Reply:
    space = call.space(space)
    side = call.access.side()
    rows = call.brain.letters.read(space, side, query=query, limit=limit, author=author, date_from=date_from,
                                   date_to=date_to)
    sealed = sum(1 for r in rows if not r.readable)
    head = (f"letter_read · space {space}{' · ' + quote(query) if query else ''}: {len(rows)} "
            f"letter{'s' if len(rows) != 1 else ''}" + (f", {sealed} sealed (metadata only)" if sealed else ""))
    if not rows:
        head += " (none)" if not query else " (none of the letters you may read holds these words)"
    return Reply(f"{head}\n\n{_letters_text(call, rows)}".rstrip(),
                 {"tool": "letter_read", "space": space, "side": side, "letters": [r.to_dict() for r in rows]})


@tool("""Change only a letter's lock (none unlocks it now; timed with unlock_date; permanent). Only the side holding
      the lock may change it; its title, words and author never change.""", destructive=True)
def letter_lock_update(
    call: Call,
    letter_id: str,
    lock_type: LOCK,
    unlock_date: WHEN = "",
    space: Space = None,
) -> Reply:
    space = call.space(space)
    side = call.access.side()
    read = call.brain.letters.relock(space, side, letter_id, lock_type, unlock_date)
    m = read.meta
    now = "open now" if m["lock_type"] == "none" else (f"timed until {m['unlock_at']}" if m["lock_type"] == "timed"
                                                      else "permanent")
    return Reply(f"lock of {letter_id} · space {space} → {now}",
                 {"tool": "letter_lock_update", "space": space, "side": side, **read.to_dict()})
