"""LibreChat: its conversation titles (read from its source: LibreChat's agents client and @librechat/agents 3.6).

After the first reply LibreChat asks the endpoint's model (or its ``titleModel``) for a title through the same
``/v1/chat/completions``. ``titleMethod: completion`` (the default) sends one user message, "Provide a concise,
5-word-or-less title for the conversation …" with the exchange under "Conversation:"; ``structured`` and
``functions`` send "Analyze this conversation and provide: …" with a schema to fill (``src/utils/title.ts`` of
@librechat/agents). Its earlier clients (``api/app/clients``) sent "Please generate a concise, 5-word-or-less
title …", the LangChain title chain "Write a concise title for this conversation …" and a language detection
("Detect the language used in the following text."). A ``titlePrompt`` of one's own is not recognised.

LibreChat sends no chat id on its own; a custom endpoint's ``headers`` in librechat.yaml take
``{{LIBRECHAT_USER_ID}}`` and ``{{LIBRECHAT_BODY_CONVERSATIONID}}``, and its title requests carry the same headers.
"""

from __future__ import annotations

from .registry import ClientAdapter, template

ADAPTER = ClientAdapter(
    name="librechat",
    title="LibreChat",
    covers="0.8 with @librechat/agents 3.6 (src/utils/title.ts: the completion and structured title prompts); "
           "the title and language prompts of its earlier clients (api/app/clients/prompts/titlePrompts.js)",
    templates=(
        template("title", "last_user",
                 "Provide a concise, 5-word-or-less title for the conversation",
                 "Analyze this conversation and provide: 1. The detected language of the conversation 2. A concise "
                 "title",
                 "Please generate a concise, 5-word-or-less title for the conversation"),
        template("title", "first_system",
                 "Please generate a concise, 5-word-or-less title for the conversation",
                 "Write a concise title for this conversation in the given language."),
        template("language", "first_system", "Detect the language used in the following text."),
    ),
    doc=__doc__ or "",
)
