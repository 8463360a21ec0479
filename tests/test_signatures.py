"""Every public callable of every family (and of diagnostics) has one of the three call shapes.

The shapes (DESIGN.md, "The contract: three call shapes"), read from signatures and return
annotations, without running anything:

1. iterative: a constructor annotated ``-> SamplingAlgorithm``;
2. one-shot / deterministic: a function annotated ``-> tuple[Result, XInfo]`` (a 2-tuple whose
   second element is an Info class); where it
   takes a ``key`` it is the first parameter, positional and required; counts (``num_*``) are
   keyword-only;
3. ask/tell: a class with ``ask(key, state, ...)`` and ``tell(state, ...)``.

Classes that are not ask/tell are values (states, Infos, terms, oracles, problems); an Info class
(``*Info``) is a NamedTuple with a ``nonfinite`` field, and its name is unique across the library.

``_PENDING`` lists the public callables that do not fit yet, each with what it returns today. The
test fails on any deviation not listed, and on a listed name that no longer deviates (so the list
only shrinks).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types

import pytest

FAMILIES = ("particles", "diffusion", "gaussian", "softmax", "subset", "risk", "decision", "mcmc",
            "choice", "diagnostics")

# public callable (where defined) -> how it deviates today
_PENDING = {
}


def _public(module, seen):
    """``(name, object)`` for every name in ``module.__all__``, recursing into the family's
    submodules listed there; each object once, named where it is defined
    (``module.qualname``), whichever family re-exports it."""
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith("jaxsample.") and obj.__name__ not in seen:
                seen.add(obj.__name__)
                yield from _public(obj, seen)
        elif id(obj) not in seen:
            seen.add(id(obj))
            where = getattr(obj, "__module__", None) or module.__name__
            yield f"{where}.{getattr(obj, '__qualname__', name)}", obj


def public_callables(families=FAMILIES):
    seen: set = set()
    out = []
    for family in families:
        module = importlib.import_module(f"jaxsample.{family}")
        seen.add(module.__name__)
        out.extend(_public(module, seen))
    return out


def public_surface():
    """``(name, object)`` for the whole public API: every family (as :func:`public_callables`),
    ``jaxsample.__all__`` (the drivers, records and top-level modules such as ``targets``) and
    every ``jaxsample.kernels`` module's ``__all__``; each object once, named where it is
    defined."""
    import pkgutil

    import jaxsample
    import jaxsample.kernels

    seen: set = set()
    modules = [importlib.import_module(f"jaxsample.{family}") for family in FAMILIES]
    modules.append(jaxsample)
    modules += [importlib.import_module(info.name) for info in
                pkgutil.iter_modules(jaxsample.kernels.__path__, "jaxsample.kernels.")]
    out = []
    for module in modules:
        if module.__name__ not in seen:
            seen.add(module.__name__)
            out.extend(_public(module, seen))
    return out


def _annotation_text(annotation) -> str:
    if isinstance(annotation, str):
        return annotation
    return getattr(annotation, "__name__", repr(annotation))


def _names_info(node) -> bool:
    """The annotation names an Info class (``XInfo``, ``mod.XInfo`` or a union of them)."""
    if isinstance(node, ast.BinOp):
        return _names_info(node.left) and _names_info(node.right)
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name.endswith("Info")


def _is_pair(annotation) -> bool:
    """``tuple[result, XInfo]``."""
    try:
        node = ast.parse(_annotation_text(annotation), mode="eval").body
    except SyntaxError:
        return False
    return (isinstance(node, ast.Subscript)
            and getattr(node.value, "id", None) in ("tuple", "Tuple")
            and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2
            and _names_info(node.slice.elts[1]))


def _key_problems(signature, *, skip_self=False):
    params = list(signature.parameters.values())[1 if skip_self else 0:]
    names = [p.name for p in params]
    problems = []
    if "rng_key" in names:
        problems.append("names its key rng_key (the key argument is called key)")
    if "key" in names:
        key = params[names.index("key")]
        if names.index("key") != 0 or key.kind not in (key.POSITIONAL_ONLY,
                                                          key.POSITIONAL_OR_KEYWORD):
            problems.append("key is not the first positional parameter")
        elif key.default is not inspect.Parameter.empty:
            problems.append("key has a default (required where randomness is used)")
    return problems


def _function_problems(fn):
    signature = inspect.signature(fn)
    returns = signature.return_annotation
    if "SamplingAlgorithm" in _annotation_text(returns):
        return []  # shape 1: an iterative constructor
    problems = _key_problems(signature)
    for p in signature.parameters.values():
        if p.name.startswith("num_") and p.kind is not p.KEYWORD_ONLY:
            problems.append(f"count {p.name} is not keyword-only")
    if returns is inspect.Signature.empty:
        problems.append("no return annotation (expected tuple[result, Info])")
    elif not _is_pair(returns):
        problems.append(f"returns {_annotation_text(returns)} (expected tuple[result, Info])")
    return problems


def _is_named_tuple(cls):
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _class_problems(cls):
    if _is_named_tuple(cls):
        if cls.__name__.endswith("Info") and "nonfinite" not in cls._fields:
            return [f"Info {cls.__name__} has no nonfinite field"]
        return []
    if hasattr(cls, "ask") or hasattr(cls, "tell"):
        problems = []
        if not (callable(getattr(cls, "ask", None)) and callable(getattr(cls, "tell", None))):
            problems.append("ask/tell class without both ask and tell")
        else:
            ask = inspect.signature(cls.ask)
            names = [p.name for p in ask.parameters.values()]
            if names[1:2] != ["key"]:
                problems.append("ask does not take key first")
            problems += _key_problems(ask, skip_self=True)
        return problems
    if cls.__name__.endswith("Info"):
        return [f"Info {cls.__name__} is not a NamedTuple"]
    return []  # a value: state, term, oracle, problem, enumeration


def problems_of(obj):
    """The reasons ``obj`` fits none of the three shapes (empty when it fits one)."""
    if inspect.isclass(obj):
        return _class_problems(obj)
    if callable(obj):
        return _function_problems(obj)
    return []  # a constant (choices tuples, defaults)


def deviations(families=FAMILIES):
    return {name: problems for name, obj in public_callables(families)
            if (problems := problems_of(obj))}


def test_every_public_callable_has_one_of_the_three_shapes():
    found = deviations()
    new = {name: problems for name, problems in found.items() if name not in _PENDING}
    assert not new, f"public callables fitting none of the three shapes: {new}"
    fixed = sorted(set(_PENDING) - set(found))
    assert not fixed, f"these now fit a shape: remove them from _PENDING: {fixed}"


def test_info_names_are_unique_and_flag_nonfinite():
    infos = {}
    for name, obj in public_callables():
        if inspect.isclass(obj) and obj.__name__.endswith("Info"):
            infos.setdefault(obj.__name__, set()).add(f"{obj.__module__}.{obj.__qualname__}")
            assert _is_named_tuple(obj) and "nonfinite" in obj._fields, name
    duplicated = {n: where for n, where in infos.items() if len(where) > 1}
    assert not duplicated, duplicated
    assert {"SHSInfo", "VMFInfo", "SoftmaxInfo", "GaussianInfo", "ETDInfo"} <= set(infos)


def _planted_module():
    """A family module with one callable of each shape and one deviation of each kind."""
    from typing import NamedTuple

    import jaxsample

    module = types.ModuleType("jaxsample.planted")

    class PlantedInfo(NamedTuple):
        nonfinite: bool

    class BadInfo(NamedTuple):
        value: float

    def iterative(logdensity_fn, *, step_size=0.1) -> jaxsample.SamplingAlgorithm: ...

    def one_shot(key, data, *, num_samples: int) -> tuple[list, PlantedInfo]: ...

    def deterministic(data, *, l2=1.0) -> tuple[list, PlantedInfo]: ...

    class AskTell:
        def init(self): ...

        def ask(self, key, state): ...

        def tell(self, state, x, y): ...

    def key_last(data, *, key=None) -> tuple[list, PlantedInfo]: ...

    def positional_count(key, data, num_samples: int) -> tuple[list, PlantedInfo]: ...

    def bare(key, data) -> list: ...

    def three(data) -> tuple[list, list, list]: ...

    class AskWithoutKey:
        def ask(self, state): ...

        def tell(self, state, x, y): ...

    for obj in (PlantedInfo, BadInfo, iterative, one_shot, deterministic, AskTell, key_last,
                positional_count, bare, three, AskWithoutKey):
        obj.__module__, obj.__qualname__ = module.__name__, obj.__name__
        setattr(module, obj.__name__, obj)
    module.__all__ = [obj.__name__ for obj in (PlantedInfo, BadInfo, iterative, one_shot,
                                                 deterministic, AskTell, key_last,
                                                 positional_count, bare, three, AskWithoutKey)]
    return module


def test_planted_deviations_fail_and_the_three_shapes_pass(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "jaxsample.planted", _planted_module())
    found = deviations(("planted",))
    assert set(found) == {f"jaxsample.planted.{n}" for n in (
        "BadInfo", "key_last", "positional_count", "bare", "three", "AskWithoutKey")}, found
    assert "key is not the first positional parameter" in found["jaxsample.planted.key_last"]
    assert "count num_samples is not keyword-only" in found[
        "jaxsample.planted.positional_count"]
    # planted into a real family, the suite's test fails on it
    import jaxsample.risk

    monkeypatch.setattr(jaxsample.risk, "__all__", [*jaxsample.risk.__all__, "planted"])
    monkeypatch.setattr(jaxsample.risk, "planted", _planted_module().bare, raising=False)
    with pytest.raises(AssertionError, match="planted"):
        test_every_public_callable_has_one_of_the_three_shapes()
