"""SillyTavern: its quiet and raw generations and its impersonation (read from its source, release 1.12.6).

SillyTavern's server relays a Chat Completion request to a "Custom (OpenAI-compatible)" endpoint with the
messages its browser side built (``src/endpoints/backends/chat-completions.js``). Besides the user's turns it sends:

- **quiet generations** (``generateQuietPrompt`` in ``public/script.js``): the whole prompt, character card and
  chat history included, with one more system message at the very end, the instruction (``populateChatCompletion``
  puts the quiet prompt last of all, ``public/scripts/openai.js``). The chat summary (``extensions/memory``),
  image prompts (``extensions/stable-diffusion``), the background choice (``backgrounds.js``), ``/gen`` and
  ``/sysgen`` are made this way; **impersonation** puts its prompt in the same place.
- **raw generations** (``generateRaw``): a system message holding the instruction and a user message holding the
  text: expression classification (``extensions/expressions``), the raw summary builders, the vectors summary.

Recognised: the default instructions of those extensions by their opening words (1.12.6), and any quiet generation
by its shape, an instruction after the companion's last message (where a user's turn ends with the user's own
message). A ``/gen`` sent right after the user's own message, ``/genraw``, or an instruction a user rewrote is read
as a chat turn. SillyTavern sends no chat or user id; its Custom endpoint's "Include headers" can send fixed
``X-Ombre-*`` headers, and a chat's session is derived from its opening (the greeting and the first message).
"""

from __future__ import annotations

from .registry import ClientAdapter, TaskShape, template
from .request import ChatRequest

QUIET = (
    template("summary", "trailing_system",
             "Ignore previous instructions. Summarize the most important facts and events in the story so far."),
    template("image_prompt", "trailing_system",
             "In the next response I want you to provide only a detailed comma-delimited list of keywords and "
             "phrases which describe",
             "Ignore previous instructions and provide a detailed description of",
             "Ignore previous instructions. Your next response must be formatted as a single comma-delimited list "
             "of concise keywords.",
             "Ignore previous instructions and provide ONLY the last chat message string back to me verbatim.",
             "Ignore previous instructions and provide an exhaustive comma-separated list of tags",
             "Provide an exhaustive comma-separated list of tags describing the appearance of the character on "
             "this image"),
    template("background", "trailing_system",
             "Ignore previous instructions and choose a location ONLY from the provided list"),
    template("impersonation", "trailing_system", "[Write your next reply from the point of view of"),
)
RAW = (
    template("expression", "first_system",
             "Ignore previous instructions. Classify the emotion of the last message."),
    template("summary", "first_system",
             "Ignore previous instructions. Summarize the most important facts and events in the story so far.",
             "Ignore previous instructions. Summarize the most important parts of the message."),
)


def _quiet_after_reply(req: ChatRequest) -> bool:
    """An instruction (a system message) after the companion's message: nothing new from the user to answer."""
    last = req.last_spoken
    return req.trailing_system is not None and last is not None and last.role == "assistant"


ADAPTER = ClientAdapter(
    name="sillytavern",
    title="SillyTavern",
    covers="1.12.6 (public/script.js generateQuietPrompt and generateRaw; the default prompts of "
           "extensions/memory, expressions, stable-diffusion, vectors, backgrounds.js and the impersonation prompt "
           "of public/scripts/openai.js)",
    templates=QUIET + RAW,
    shapes=(TaskShape("quiet", _quiet_after_reply, "a system instruction after the companion's last message"),),
    doc=__doc__ or "",
)
