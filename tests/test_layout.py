"""The tree shows the architecture: wings without import cycles, small modules, SQL where it belongs.

These read the package's source (with ``ast``), so a rule broken anywhere fails here with the
file and line that broke it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ombre_brain"
MAX_LINES = 500
WINGS = ("config", "store", "retrieval", "turn", "writing", "gateway", "dream", "facts", "forget", "kinds", "profile",
         "server", "debug_ui", "mcp", "replay", "portability", "evaluate", "demo", "cli")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines inside `if TYPE_CHECKING:` blocks: those imports never run."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, *, type_checking: bool = False) -> set[str]:
    """Package modules this module imports, at module level or inside functions (and, with ``type_checking``,
    under ``if TYPE_CHECKING:`` too)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_lines(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ombre_brain"))
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path.name == "__init__.py", node)
            if not target.startswith("ombre_brain"):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.add(sub if sub in MODULES else target)
    return {m for m in found if m in MODULES and m != module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycles_even_through_type_checking_imports():
    """A circle that only type checkers follow still ties the modules together for a reader: none at all."""
    cycle = _cycle({m: imports_of(m, type_checking=True) for m in MODULES})
    assert cycle is None, "import cycle (type-checking imports included): " + " -> ".join(cycle or [])


TRANSPORTS = ("ombre_brain.server", "ombre_brain.mcp", "ombre_brain.cli", "ombre_brain.debug_ui")
OUTER = ("ombre_brain.cli", "ombre_brain.evaluate")  # the command line and the evaluation it runs may use anything
SERVING = ("ombre_brain.server", "ombre_brain.debug_ui", "ombre_brain.mcp", "ombre_brain.gateway", "ombre_brain.turn")
EVALUATION = ("ombre_brain.evaluate",
              "ombre_brain.tools")  # the shelf evaluation shared with import, replay and doctor until issue 51
ASSEMBLY = {"ombre_brain.server.app": ("ombre_brain.debug_ui", "ombre_brain.mcp")}  # the app mounts their routes


def _wing(module: str, wings: tuple[str, ...]) -> str | None:
    return next((w for w in wings if module == w or module.startswith(w + ".")), None)


def test_the_core_imports_no_transport():
    """brain, turn, store, retrieval, dream (and every other module that is neither a transport nor evaluation) never
    import server, mcp, cli or debug_ui, even for type checking: the arrows point from the transports to the core."""
    bad = []
    for m in MODULES:
        if _wing(m, TRANSPORTS) or _wing(m, OUTER):
            continue
        bad += [f"{m} -> {n}" for n in sorted(imports_of(m, type_checking=True)) if _wing(n, TRANSPORTS)]
    assert not bad, "core modules importing a transport: " + "; ".join(bad)


def test_transports_import_each_other_only_through_neutral_modules():
    """server, mcp and debug_ui share their request and token helpers through neutral modules, never each other's;
    only the app (which mounts the others' routes) and the command line reach across."""
    bad = []
    for m in MODULES:
        own = _wing(m, TRANSPORTS)
        if own is None or own == "ombre_brain.cli":
            continue
        for n in sorted(imports_of(m, type_checking=True)):
            other = _wing(n, TRANSPORTS)
            if other is None or other == own or other in ASSEMBLY.get(m, ()):
                continue
            bad.append(f"{m} -> {n}")
    assert not bad, "transports importing each other: " + "; ".join(bad)


def test_no_serving_module_imports_the_evaluation_wing():
    """server, debug_ui, mcp, gateway and turn never import the evaluation wing (the eval commands, the benchmarks, the
    fits), even for type checking: the debug UI takes the policy playground's engine from ``replay/``. ``tools/``, the
    shelf that engine shared with the benchmarks until issue 51, is named too, so that no such shelf comes back under a
    serving path."""
    bad = [f"{m} -> {n}" for m in MODULES if _wing(m, SERVING)
           for n in sorted(imports_of(m, type_checking=True)) if _wing(n, EVALUATION)]
    assert not bad, "serving modules importing the evaluation wing: " + "; ".join(bad)


def test_nothing_but_the_command_line_imports_it():
    bad = [f"{m} -> {n}" for m in MODULES if not m.startswith("ombre_brain.cli")
           for n in imports_of(m, type_checking=True) if n.startswith("ombre_brain.cli")]
    assert not bad, bad


def test_no_import_cycles():
    graph = {m: imports_of(m) for m in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_cycle_check_sees_function_local_imports(tmp_path):
    """The walker must see an import inside a function (that is how the old cycles hid)."""
    graph = imports_of("ombre_brain.replay.scenario")
    assert "ombre_brain.brain" in graph


def test_wings_are_packages():
    for wing in WINGS:
        assert (PKG / wing / "__init__.py").exists(), f"ombre_brain/{wing}/ is not a package"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    n = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {n} lines; split it by concept"


def test_command_handlers_live_only_in_the_cli():
    for module, path in MODULES.items():
        if module.startswith("ombre_brain.cli"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        handlers = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("cmd_")]
        assert not handlers, f"{path.relative_to(ROOT)} defines CLI handlers {handlers}; they belong in cli/"


STORE_TABLES = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(?:buckets|moments|edges|spaces|store_meta)\b", re.I)


def test_only_the_store_runs_sql_on_its_tables():
    for module, path in MODULES.items():
        if module.startswith("ombre_brain.store"):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not STORE_TABLES.search(line), f"{path.relative_to(ROOT)}:{i} runs SQL on the store's tables"


def test_no_optional_capabilities_on_the_turn_path():
    for path in MODULES.values():
        text = path.read_text(encoding="utf-8")
        assert "find_spec" not in text and "_optional(" not in text, f"{path.relative_to(ROOT)} probes for modules"


def test_run_turn_reads_as_the_pipeline():
    """design §2: plan -> candidates -> gates -> diffusion -> side sections -> render -> budget, one call each."""
    tree = ast.parse(MODULES["ombre_brain.turn.pipeline"].read_text(encoding="utf-8"))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "run_turn")
    nodes = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    calls = [ast.unparse(n.func) for n in nodes]
    order = ["parts.policy.plan_query", "parts.retriever.search", "parts.admitter.admit", "direct_stage",
             "related_stage", "side_stage", "render_items", "assemble"]
    positions = [calls.index(c) for c in order]
    assert positions == sorted(positions), calls


def test_pure_stages_import_no_io():
    """Gates, diffusion, render, budget, fusion, layer inference and the client adapters stay free of Chroma, SQLite,
    Flask and HTTP."""
    pure = ["ombre_brain.turn.gates", "ombre_brain.turn.reasons", "ombre_brain.turn.diffusion",
            "ombre_brain.turn.render", "ombre_brain.turn.budget", "ombre_brain.retrieval.fusion",
            "ombre_brain.memory_layers", "ombre_brain.recall_policy", "ombre_brain.text", "ombre_brain.timeutil",
            "ombre_brain.gateway.clients.registry", "ombre_brain.gateway.clients.request",
            "ombre_brain.gateway.clients.openwebui", "ombre_brain.gateway.clients.sillytavern",
            "ombre_brain.gateway.clients.librechat", "ombre_brain.gateway.clients.openai"]
    for m in pure:
        text = MODULES[m].read_text(encoding="utf-8")
        for lib in ("chromadb", "sqlite3", "flask", "httpx"):
            assert not re.search(rf"^\s*(import|from) {lib}\b", text, re.M), f"{m} imports {lib}"


def test_the_packaged_default_config_is_the_documented_copy():
    assert (PKG / "default.yaml").read_bytes() == (ROOT / "config" / "default.yaml").read_bytes(), (
        "ombre_brain/default.yaml and config/default.yaml differ: edit one, copy it to the other")


def test_every_design_section_a_comment_cites_exists():
    """Comments cite docs/design.md as ``design §N`` (or ``docs/design.md §N``): each N must be a section of it."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    sections = {int(m) for m in re.findall(r"^## (\d+)\. ", design, re.M)}
    assert sections >= set(range(1, 21)), sorted(sections)
    bad = []
    for path in [*PKG.rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in re.finditer(r"(?:docs/design\.md|design)\s*§\s*(\d+)", line):
                if int(m.group(1)) not in sections:
                    bad.append(f"{path.relative_to(ROOT)}:{i} cites §{m.group(1)}")
            if "DESIGN §" in line and path.name != "test_layout.py":
                bad.append(f"{path.relative_to(ROOT)}:{i} cites DESIGN §, a document that is not in the repository")
    assert not bad, bad
