"""Any other OpenAI-compatible client (the ``openai`` SDKs, curl, a gateway of one's own).

It has no background tasks Ombre Brain could know, so every request is a chat turn unless it says otherwise:
``X-Ombre-Task: <name>`` marks a request the user did not write (a title, a summary), forwarded untouched.
``X-Ombre-Space`` and ``X-Ombre-Session-Id`` name the space and the conversation (the SDKs send them with
``default_headers`` or ``extra_headers``); without a session header each conversation gets the session derived
from its opening. It is the registry's last entry and the name a request no adapter recognised is reported under.
"""

from __future__ import annotations

from .registry import ClientAdapter

ADAPTER = ClientAdapter(
    name="openai",
    title="OpenAI-compatible client",
    covers="any: the X-Ombre-* headers only",
    doc=__doc__ or "",
)
