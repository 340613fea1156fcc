"""Moving data in and out: the portable JSONL export and its import, migration from Ombre-Brain, and the ledger's move.

``jsonl`` writes one space as versioned JSONL and restores it (re-embedding with the configured model);
``read_only`` opens a data directory's ledger alone, so ``export`` reads beside the process that writes;
``ombre_md`` decides which files of an Ombre-Brain vault or backup become memories, ``ombre_md_map`` maps one
markdown bucket onto our fields and ``ombre_md_kinds`` its letters, plans and ``I`` entries onto our kinds;
``migrate_ledger`` copies an embedded ledger into PostgreSQL. The CLI's ``export``, ``import`` and
``migrate-ledger`` call them; no serving path does.
"""
