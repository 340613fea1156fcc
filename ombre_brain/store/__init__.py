"""The store: buckets and moments kept consistent across the ledger, Chroma and the lexical index.

``bucket_store`` is the facade every wing calls, composed of one component per concern: ``core``
(the engines, encoders, lexical indexes and locks every component shares), ``scope`` (a turn's
memo), ``reads``, ``edges``, ``writes`` (the write-ahead protocol and crash recovery), ``bulk``,
``forgetting`` and ``consistency``. ``interfaces`` names what each wing may ask of it. ``schema``
holds its tables and their migrations, ``changes`` the change sequence the lexical index follows,
``claims`` the rules for a repeated write; ``ledger`` (SQLite or PostgreSQL) and ``chroma`` are the
engines underneath. Every SQL statement on the store's own tables lives in this package. ``doctor`` runs
the consistency checks and repairs over every space for ``ombre-brain doctor`` and ``reindex``.
"""
