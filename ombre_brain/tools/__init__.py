"""Tools around the core: `bench`, `evaluate`, `replay`, `doctor`, export/import and the ombre-md migration.

Each is a library module the CLI calls; none of them is on the turn path.
"""
