"""Replay: turns run again, from a scenario file or beside a draft policy (docs/design.md §11, §22).

``scenario`` runs a scenario in a fresh store and checks its expectations (`ombre-brain replay`; the demo persona
is seeded through it). The policy playground's engine, which the debug UI serves: ``draft`` checks a draft policy
and builds the turn parts it needs; ``sources`` gathers the turns to replay (a space's recorded turns, scenarios,
or a labelled set, scored with the evaluation's own loaders and scores); ``pairs`` runs each turn under both
policies as dry runs; ``diff`` says what changed; ``playground`` runs one replay from start to result.
"""
