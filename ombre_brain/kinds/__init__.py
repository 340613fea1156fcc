"""Letters, plans, anchors and the self-model: the kinds of memory that are read through their own tools.

Ombre-Brain keeps these apart from ordinary memories (docs/design.md §3, §4, §19). Here each is a
bucket of its own ``type`` (``letter``, ``plan``, ``self``) with its own fields in ``Bucket.kind_fields``,
and its own layer (``memory_layers.py``) whose policy row keeps it out of every turn. One module
per concept:

- :mod:`.fields`     the kinds' fields: validation and defaults (pure; ``buckets.py`` calls it)
- :mod:`.letters`    a letter's lock: sides, who may read it, the sealed view (pure)
- :mod:`.letterbox`  writing, reading and relocking letters for a side (the store's I/O)
- :mod:`.closure`    whether a later memory says a plan happened (pure)
- :mod:`.plans`      plans: adding, status changes, closure by later memories
- :mod:`.anchors`    the anchor flag with Ombre-Brain's cap of 24 per space
- :mod:`.selfmodel`  the ``I`` entries: candidates, dream witnesses, promotion, session start
- :mod:`.migrate`    stores imported before the kinds existed, converted once on open

Importing this package imports none of them, so ``buckets.py`` can use :mod:`.fields` without a cycle.
"""
