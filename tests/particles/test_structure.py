"""The particle family stays readable (issue 46): no function in ``jaxsample/particles/`` is
longer than 80 lines (from ``def`` to its last line, docstring included), and ``etd.py`` holds
only the method: its public names are ``init``, ``build_kernel``, ``etd``, the state, the info
and the ``ETD_HARD`` preset (the preconditioners, the Laplace fit, the option objects and the
verdict's criteria live in their own modules)."""

import ast
import importlib
import pathlib

etd_module = importlib.import_module("jaxsample.particles.etd")

PARTICLES = pathlib.Path(etd_module.__file__).parent
MAX_LINES = 80


def _long_functions(source: str, limit: int = MAX_LINES):
    return [(node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > limit]


def test_no_function_in_particles_is_longer_than_80_lines():
    found = {path.name: _long_functions(path.read_text()) for path in PARTICLES.glob("*.py")}
    assert not {k: v for k, v in found.items() if v}, found


def test_the_length_rule_sees_a_long_function():
    planted = "def f():\n" + "    x = 1\n" * MAX_LINES
    assert _long_functions(planted) == [("f", MAX_LINES + 1)]


def test_etd_module_holds_only_the_method():
    assert sorted(etd_module.__all__) == ["ETDInfo", "ETDState", "ETD_HARD", "build_kernel",
                                          "etd", "init"]
    tree = ast.parse(pathlib.Path(etd_module.__file__).read_text())
    public_defs = {node.name for node in tree.body
                   if isinstance(node, ast.FunctionDef | ast.ClassDef)
                   and not node.name.startswith("_")}
    assert public_defs == {"ETDInfo", "ETDState", "build_kernel", "etd", "init"}
