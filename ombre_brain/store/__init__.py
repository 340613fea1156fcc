"""The store: buckets and moments kept consistent across the ledger, Chroma and the lexical index.

``bucket_store`` is the facade (writes, updates, deletes, crash recovery); ``reads``, ``edges``,
``forgetting`` and ``consistency`` are its other halves; ``schema`` holds its tables and their
migrations, ``changes`` the change sequence the lexical index follows; ``ledger`` (SQLite or
PostgreSQL) and ``chroma`` are the engines underneath. Every SQL statement on the store's own
tables lives in this package.
"""
