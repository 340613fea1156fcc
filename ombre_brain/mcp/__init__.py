"""The MCP server (design §15, §19): Ombre-Brain's sixteen tool names over stdio and streamable HTTP.

Existing Ombre-Brain users keep the tools their prompts are built on, with its parameter names,
while each tool calls the Brain (its methods, or its ``letters``, ``plans``, ``anchors`` and
``self_model`` parts). One module per concept:

- :mod:`.access`    who may use which space (the HTTP API's token rules), which side of letters a call acts for
- :mod:`.registry`  the ``@tool`` registry; :mod:`.tools` lists the tool modules in the order clients see them
- :mod:`.recall`    ``breath`` and ``breath_search``: dry-run turns; :mod:`.exact`: quoted phrases, literally
- :mod:`.advanced`  ``breath_advanced``: feel notes, importance, catalog, filtered search, feeling
- :mod:`.write`     ``hold`` and ``grow``: Ombre-Brain's arguments as design §3 fields
- :mod:`.split`     how ``grow`` cuts a longer text, by rules or with the upstream LLM
- :mod:`.source`    ``source_read``: a memory's source lines
- :mod:`.trace`     ``trace``: edit, archive, restore, reinforce, link or purge one memory; a plan's status
- :mod:`.status`    ``dream`` and ``pulse``
- :mod:`.plans`     ``plan``; :mod:`.anchors`: ``anchor``, ``release``
- :mod:`.letters`   ``letter_write``, ``letter_read``, ``letter_lock_update``: the companion's side
- :mod:`.selfmodel` ``I``
- :mod:`.format`    replies: text a model reads well, plus structured content naming bucket ids
- :mod:`.server`    registration on the SDK's ``MCPServer``, errors as tool errors, stdio
- :mod:`.http`      ``/mcp`` inside ``ombre-brain serve``: the SDK's ASGI app answered from WSGI

Importing this package imports nothing from the ``mcp`` SDK; :mod:`.server` and :mod:`.http` do.
"""
