"""The demo persona (``persona.yaml``, haven:xiaoyu) and ``seed``, which writes it into a Brain for ``make demo``,
``ombre-brain demo``, the tests and the benchmarks."""
