"""Open WebUI: its background tasks and the ids it can send (read from its package, ``open_webui`` 0.12.4).

Open WebUI asks the chat model for a title, tags and follow-up suggestions after replies (and, when enabled,
search queries, autocompletion, an image prompt, an emoji, a merged answer, a tool choice, a compacted history)
through the same ``/v1/chat/completions``: one user message holding a template from ``open_webui/config.py``
(``DEFAULT_*_PROMPT_TEMPLATE``), non-streamed. The templates are recognised by their opening words: the 0.12.4
defaults, and the earlier wording of the title and follow-up templates (the 0.6 series). A template a user
rewrote in its settings is not recognised; the header ``X-Ombre-Task: {{TASK}}`` in its connection's headers
says every task by name whatever its template (``{{TASK}}`` is empty on a chat turn).

It names the chat and the user only when asked: ``{{CHAT_ID}}`` and ``{{USER_ID}}`` in those headers, or
``ENABLE_FORWARD_USER_INFO_HEADERS=true``, which adds ``X-OpenWebUI-User-Id`` and ``X-OpenWebUI-Chat-Id``.
"""

from __future__ import annotations

from .registry import ClientAdapter, TaskShape, template
from .request import ChatRequest

CHAT_ID_HEADER = "X-OpenWebUI-Chat-Id"
USER_HEADERS = ("X-OpenWebUI-User-Id", "X-OpenWebUI-User-Name", "X-OpenWebUI-Chat-Id")

TEMPLATES = (
    template("title", "last_user",
             "### Task: Generate a concise title summarizing the chat history",
             "### Task: Generate a concise, 3-5 word title with an emoji summarizing the chat history"),
    template("tags", "last_user",
             "### Task: Generate 1-3 broad tags categorizing the main themes of the chat history"),
    template("follow_ups", "last_user",
             "### Task: Predict 3-5 useful messages this user might naturally send next",
             "### Task: Suggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next"),
    template("image_prompt", "last_user",
             "### Task: Generate a detailed prompt for am image generation task",
             "### Task: Generate a detailed prompt for an image generation task"),
    template("queries", "last_user",
             "### Task: Analyze the chat history to determine the necessity of generating search queries"),
    template("autocomplete", "last_user", "### Task: You are an autocompletion system."),
    template("compaction", "last_user",
             "### Task: Summarize the conversation history that will be compacted out of the active chat context"),
    template("emoji", "last_user",
             "Your task is to reflect the speaker's likely facial expression through a fitting emoji."),
    template("merge_answers", "last_user",
             "You have been provided with a set of responses from various models to the latest user query"),
)


def _tool_choice(req: ChatRequest) -> bool:
    """Its prompt-based tool choice: the tools' template as the system message, then "Query: …" (or "History: …")."""
    first, last = req.first_system or "", req.last_user or ""
    return (first.startswith("Available Tools:") and "Your task is to choose and return the correct tool" in first
            and last.startswith(("Query:", "History:")))


ADAPTER = ClientAdapter(
    name="openwebui",
    title="Open WebUI",
    covers="0.12.4 (the DEFAULT_*_PROMPT_TEMPLATE values of open_webui/config.py and utils/context_compaction.py); "
           "the 0.6-series wording of the title and follow-up templates",
    templates=TEMPLATES,
    shapes=(TaskShape("tool_choice", _tool_choice, "Available Tools: … as the system message, Query: … the user's"),),
    sent_by=lambda req: any(req.header(h) for h in USER_HEADERS),
    chat_id=lambda req: req.header(CHAT_ID_HEADER) or None,
    doc=__doc__ or "",
)
