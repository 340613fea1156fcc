"""The built-in client adapters, registered into :data:`~.registry.CLIENTS` in the order their tasks are tried.

The generic OpenAI client is last: it recognises nothing, and its name is what an unrecognised request is
reported under. A new client is one module with an ``ADAPTER`` and one line here (or ``CLIENTS.register``).
"""

from __future__ import annotations

from . import librechat, openai, openwebui, sillytavern
from .registry import CLIENTS

for _adapter in (openwebui.ADAPTER, sillytavern.ADAPTER, librechat.ADAPTER, openai.ADAPTER):
    if _adapter.name not in CLIENTS.names:
        CLIENTS.register(_adapter)

__all__ = ["CLIENTS"]
