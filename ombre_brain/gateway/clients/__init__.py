"""Client adapters: which chat frontend sent a proxied request, whether it is a chat turn or a background task,
and which session it belongs to (design §7.3). See :mod:`.registry`."""

from .registry import CLIENTS, ClientAdapter, TaskShape, TaskTemplate, template
from .request import ChatRequest, Reading
from .table import CLIENTS as _registered  # noqa: F401  (registers the built-in adapters)

__all__ = ["CLIENTS", "ChatRequest", "ClientAdapter", "Reading", "TaskShape", "TaskTemplate", "template"]
