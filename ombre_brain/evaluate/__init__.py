"""Evaluation: the commands that measure the library, the benchmarks, and the fits that write what it ships.

Nothing here is on a serving path (``tests/test_layout.py`` holds server, debug UI, MCP, gateway and turn to it).
One module per command or measurement:

- ``ranking`` (`eval locomo`, `eval recall`: recall@k beside dense and BM25), ``inject`` (`eval inject`: what a
  turn injects), ``conversation`` (`eval conversation`: the whole loop), ``longmemeval``, ``plan`` (`eval plan`);
- ``bench`` with ``bench_check`` and ``bench_playground`` (`bench`), ``long_writes``, ``mcp_latency`` and
  ``residue`` (run with ``python -m``; docs/benchmarks.md and docs/forgetting.md quote them);
- ``calibrate`` with ``calibrate_examples`` (admission's evidence score), ``fit_writer``, ``fit_reader`` with
  ``reader_data``, ``fit_supersede``: each fits a model on labelled data and writes it; ``background`` and
  ``dict_kinds`` rebuild the vectors and the word table the package ships (``python -m``).

The package re-exports the helpers evaluation scripts outside the repository import
(``from ombre_brain.evaluate import Memory, Rankers, load_locomo, memory_bucket, parse_locomo_time``).
"""

from __future__ import annotations

from .ranking import Memory, Rankers, load_locomo, memory_bucket, parse_locomo_time

__all__ = ["Memory", "Rankers", "load_locomo", "memory_bucket", "parse_locomo_time"]
