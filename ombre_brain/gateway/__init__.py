"""The gateway: durable sessions and cooldowns, the upstream LLM client, and memory writing after an exchange.

``core.Gateway`` holds them; ``sessions`` keeps rounds and cooldowns in the ledger; ``upstream`` is
the HTTP client of the proxied LLM; ``jobs`` and ``ingest`` turn finished exchanges into memory.
"""
