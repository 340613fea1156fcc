"""The write path, a wing of its own as ``retrieval/`` is for reading (docs/design.md §7.4, §17):

    exchange -> write decision -> drafts (user side / relationship side) -> joins -> buckets -> index

``exchange`` validates one exchange and names it (its id keeps a replay a no-op). The write decision is
``learned`` (the default: ``signals`` and ``features`` make the vector, ``model`` holds the weights,
``decision`` the verdict and its rules, ``compose`` the drafts with ``affect`` and ``when``), ``rules``
(cue words) or ``extractor`` (an upstream LLM). ``joining`` makes a repeat one more claim on a stored
memory. ``writer`` runs it all through ``Brain.write``; the gateway's queue (``gateway/ingest.py``) and
``Brain.ingest_exchange`` both run :class:`~.writer.Writer`.
"""
