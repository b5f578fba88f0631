"""The engine's layout stays readable: no import cycles between modules of `benchmark`, no function longer than a
screen or two (MAX_FUNCTION_LINES, docstring included) but the few named below, each with its reason."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "benchmark"
MAX_FUNCTION_LINES = 60
LONG_FUNCTIONS = {  # module:function -> why it stays in one piece
    "benchmark.leaderboard.page:render_html": "the page's sections in reading order, one string each",
    "benchmark.cli.eval:run_eval": "a command read top to bottom: load, generate, grade, record",
    "benchmark.leaderboard.targets:freeze_target": "the protocol of freezing a target, step by step, as documented",
    "benchmark.engine.measure_mu:measure": "one timing experiment: warm-up, timed calls, the ratio",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking_only(node: ast.If) -> bool:
    return isinstance(node.test, (ast.Name, ast.Attribute)) and "TYPE_CHECKING" in ast.unparse(node.test)


def imported_modules(path: Path) -> set[str]:
    """Every benchmark module `path` imports, at the top or inside a function (lazy imports count too:
    a cycle through them is still a cycle of responsibilities)."""
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking_only(node)
               for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from benchmark.grading import lean` imports the module benchmark.grading.lean
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return {m for m in found if m in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycles():
    graph = {name: imported_modules(path) - {name} for name, path in MODULES.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def long_functions() -> dict[str, int]:
    found = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found[f"{name}:{node.name}"] = lines
    return found


def test_no_function_over_the_length_limit():
    found = long_functions()
    too_long = {k: n for k, n in found.items() if k not in LONG_FUNCTIONS}
    assert not too_long, f"split these functions (over {MAX_FUNCTION_LINES} lines): {too_long}"
    stale = sorted(set(LONG_FUNCTIONS) - set(found))
    assert not stale, f"no longer long, take them off LONG_FUNCTIONS: {stale}"
