"""Units a person can read (issue 14): no module over 500 lines and no function over 80 lines in the package, its
top-level kernels/ and search_spaces/ and scripts/, Triton kernels (`@triton.jit`) aside. A unit that grows past
either size is split, not exempted."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def source_files() -> list[Path]:
    files = [p for folder in ("autotune", "kernels", "search_spaces", "scripts") for p in (ROOT / folder).rglob("*.py")]
    return sorted(f for f in files if "__pycache__" not in f.parts)


def is_triton_kernel(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated `@triton.jit` (or `@triton.jit(...)`): a GPU kernel, one launch per body."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if ast.unparse(target) == "triton.jit":
            return True
    return False


def oversized(text: str, rel: str) -> list[str]:
    """What the module `rel` (its source `text`) has over the limits, one line each."""
    found = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{rel}: module of {lines} lines (max {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not is_triton_kernel(node):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{rel}:{node.lineno} {node.name}: function of {length} lines (max {MAX_FUNCTION_LINES})")
    return found


def test_no_module_or_function_over_the_limits():
    over = [
        item
        for p in source_files()
        for item in oversized(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())
    ]
    assert not over, "split these units (tests/test_sizes.py):\n" + "\n".join(over)


def test_the_checker_finds_a_long_function_and_a_long_module_but_not_a_triton_kernel():
    body = "    x = 1\n" * MAX_FUNCTION_LINES  # with its `def` line: one over the limit
    assert oversized("def f():\n" + body, "a.py") == [f"a.py:1 f: function of {MAX_FUNCTION_LINES + 1} lines (max 80)"]
    assert oversized("def f():\n" + body[10:], "a.py") == []  # exactly at the limit
    assert oversized("import triton\n\n\n@triton.jit\ndef k():\n" + body, "a.py") == []
    assert oversized("class C:\n    def m(self):\n" + "    " + body.replace("\n", "\n    ").rstrip(" "), "a.py") == [
        f"a.py:2 m: function of {MAX_FUNCTION_LINES + 1} lines (max 80)"
    ]
    module = "x = 1\n" * (MAX_MODULE_LINES + 1)
    assert oversized(module, "b.py") == [f"b.py: module of {MAX_MODULE_LINES + 1} lines (max 500)"]
