"""The public surface: a small, sorted __all__, and every CLI command documented in the README."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ombre_brain
from ombre_brain.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_sorted_and_complete():
    assert ombre_brain.__all__ == sorted(ombre_brain.__all__)
    public = {n for n in dir(ombre_brain) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(ombre_brain.__all__), public - set(ombre_brain.__all__)
    for name in ombre_brain.__all__:
        assert hasattr(ombre_brain, name)


def test_error_hierarchy_has_one_root():
    errors = [getattr(ombre_brain, n) for n in ombre_brain.__all__ if n.endswith("Error")]
    assert all(issubclass(e, ombre_brain.OmbreError) for e in errors)
    assert all(e.__doc__ for e in errors), "each error says when it is raised"


def test_every_cli_command_is_documented_and_has_help():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in sub.choices:
        assert f"`{name}" in readme or f"ombre-brain {name}" in readme, f"README does not mention `{name}`"
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for name in sub.choices:
        assert name in r.stdout


def test_only_the_commands_that_serve_import_the_servers():
    """The MCP SDK and Flask take ~1 s to import: `mcp`, `serve` and `demo` import them when they run, so an
    `import` or an `eval` does not pay for them (docs/benchmarks.md, "Import cost, eighth round")."""
    probe = "import sys, ombre_brain.cli; print(sorted(m for m in ('mcp', 'flask') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
