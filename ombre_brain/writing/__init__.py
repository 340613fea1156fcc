"""The write path, a wing of its own as ``retrieval/`` is for reading (docs/design.md §7, §17):

    exchange -> write decision -> drafts (user side / relationship side) -> buckets -> index

``exchange`` validates one exchange and names it (its id keeps a replay a no-op); ``rules`` and
``extractor`` are the write decisions (cue words, or an upstream LLM); ``drafts`` is what a decision
hands on; ``writer`` runs the decision and writes the drafts through ``Brain.write``. The gateway's
queue (``gateway/ingest.py``) and ``Brain.ingest_exchange`` both run :class:`~.writer.Writer`.
"""
