"""The MCP server (design §15): Ombre-Brain's tool names over stdio and streamable HTTP.

Existing Ombre-Brain users keep the tools their prompts are built on — ``breath``,
``breath_search``, ``hold``, ``grow``, ``trace``, ``dream`` and ``pulse`` — while each tool calls
one Brain method. One module per concept:

- :mod:`.breath`   the breath profile: how ``breath()`` reads a space without a query (pure, no SDK)
- :mod:`.access`   who may use which space (the HTTP API's token rules), and one tool call's context
- :mod:`.recall`   ``breath`` and ``breath_search``: dry-run turns
- :mod:`.write`    ``hold`` and ``grow``: Ombre-Brain's arguments as design §3 fields
- :mod:`.split`    how ``grow`` cuts a longer text, by rules or with the upstream LLM
- :mod:`.trace`    ``trace``: edit, archive, restore, reinforce, link or purge one memory
- :mod:`.status`   ``dream`` and ``pulse``
- :mod:`.format`   replies: text a model reads well, plus structured content naming bucket ids
- :mod:`.server`   registration on the SDK's ``MCPServer``, errors as tool errors, stdio
- :mod:`.http`     ``/mcp`` inside ``ombre-brain serve``: the SDK's ASGI app answered from WSGI

Importing this package imports nothing from the ``mcp`` SDK; :mod:`.server` and :mod:`.http` do.
"""
