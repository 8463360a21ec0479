"""The public API as a committed text file: a change to it is a decision, never an accident.

``tests/api_snapshot.txt`` holds one line per public object (the surface
``test_signatures.public_surface`` walks: every family's ``__all__``, ``jaxsample.__all__`` and
every ``jaxsample.kernels`` module's ``__all__``), sorted:

* a function: its parameter names, kinds (``/`` and ``*`` markers, ``*args``, ``**kwargs``) and
  defaults (``repr``), no annotations;
* a NamedTuple (a State, an Info, a record): its field names;
* any other class: its constructor's signature, and one line per public method or property it
  defines; an enumeration: its members;
* a constant (a tuple of choices): its ``repr``.

The test fails on any difference, naming what was added, removed or changed. When the change
is meant, regenerate the file with one command from the repository root::

    python tests/test_api_snapshot.py --update

commit it with the change, and name every added, removed or changed public name in
CHANGELOG.md (under the unreleased section).
"""

from __future__ import annotations

import inspect
import pathlib
import re
import sys

import equinox as eqx
from test_signatures import public_surface

SNAPSHOT = pathlib.Path(__file__).with_name("api_snapshot.txt")
_REGENERATE = "python tests/test_api_snapshot.py --update"


def _default(value) -> str:
    text = repr(value)
    # an object's default repr holds its address, which changes from run to run
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def _signature(obj, *, skip_self=False) -> str:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(<no signature>)"
    parts, keyword_marked = [], False
    params = list(signature.parameters.values())[1 if skip_self else 0:]
    for i, p in enumerate(params):
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            keyword_marked = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not keyword_marked:
            parts.append("*")
            keyword_marked = True
        parts.append(p.name if p.default is p.empty else f"{p.name}={_default(p.default)}")
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params)
                                            or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    return f"({', '.join(parts)})"


def _class_lines(name, cls):
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        lines = [f"{name} namedtuple({', '.join(cls._fields)})"]
    elif isinstance(cls, type(eqx.Enumeration)) and hasattr(cls, "_name_to_item"):
        return [f"{name} enumeration({', '.join(cls._name_to_item)})"]
    else:
        lines = [f"{name} class{_signature(cls)}"]
    for attr, member in sorted(vars(cls).items()):
        if attr.startswith("_") or (hasattr(cls, "_fields") and attr in cls._fields):
            continue
        if isinstance(member, property):
            lines.append(f"{name}.{attr} property")
        elif isinstance(member, classmethod | staticmethod):
            bound = isinstance(member, classmethod)
            lines.append(f"{name}.{attr}{_signature(member.__func__, skip_self=bound)}")
        elif inspect.isfunction(member):
            lines.append(f"{name}.{attr}{_signature(member)}")
    return lines


def surface_lines() -> list[str]:
    """The live public surface, one sorted line per object (the snapshot's format)."""
    lines = []
    for name, obj in public_surface():
        if inspect.isclass(obj):
            lines += _class_lines(name, obj)
        elif callable(obj):
            lines.append(f"{name}{_signature(obj)}")
        else:
            lines.append(f"{name} = {_default(obj)}")
    return sorted(lines)


def _key(line: str) -> str:
    """The public name a line describes (what comes before its signature or description)."""
    return re.split(r"[( ]", line, maxsplit=1)[0]


def compare(recorded: list[str], live: list[str]) -> str:
    """A readable report of how ``live`` differs from ``recorded`` (empty when they agree)."""
    old = {_key(line): line for line in recorded}
    new = {_key(line): line for line in live}
    report = [f"  added:   {new[k]}" for k in sorted(set(new) - set(old))]
    report += [f"  removed: {old[k]}" for k in sorted(set(old) - set(new))]
    for k in sorted(set(old) & set(new)):
        if old[k] != new[k]:
            report += [f"  changed: {k}", f"      was: {old[k]}", f"      now: {new[k]}"]
    if not report:
        return ""
    return "\n".join([
        f"the public API differs from {SNAPSHOT.relative_to(SNAPSHOT.parents[1])}:", *report,
        f"If the change is meant: run `{_REGENERATE}`, commit the file, and name every added, "
        "removed or changed public name in CHANGELOG.md (under the unreleased section)."])


def _recorded() -> list[str]:
    return SNAPSHOT.read_text().splitlines()


def test_the_public_api_matches_the_snapshot():
    difference = compare(_recorded(), surface_lines())
    assert not difference, difference


def test_a_planted_rename_is_reported(monkeypatch):
    """A renamed keyword, a renamed function and a renamed State field each show in the report,
    and the snapshot test fails on them."""
    from jaxsample.mcmc import MALAState, mala, sample_until_stopped

    signature = inspect.signature(mala)
    renamed = [p.replace(name="step") if p.name == "step_size" else p
               for p in signature.parameters.values()]
    monkeypatch.setattr(mala, "__signature__", signature.replace(parameters=renamed),
                        raising=False)
    monkeypatch.setattr(sample_until_stopped, "__qualname__", "run_until_stopped")
    monkeypatch.setattr(MALAState, "_fields", ("position", "logdensity", "score", "count"))
    report = compare(_recorded(), surface_lines())
    assert "changed: jaxsample.mcmc.mala.mala\n" in report
    was, now = (line for line in report.splitlines()
                if line.lstrip().startswith(("was: jaxsample.mcmc.mala.mala(",
                                             "now: jaxsample.mcmc.mala.mala(")))
    assert "step_size" in was and "step_size" not in now and "*, step," in now
    assert "removed: jaxsample.mcmc.stopping.sample_until_stopped(" in report
    assert "added:   jaxsample.mcmc.stopping.run_until_stopped(" in report
    assert "now: jaxsample.mcmc.mala.MALAState namedtuple(position, logdensity, score, count)" \
        in report
    assert _REGENERATE in report and "CHANGELOG.md" in report
    try:
        test_the_public_api_matches_the_snapshot()
    except AssertionError as error:
        assert "run_until_stopped" in str(error)
    else:
        raise AssertionError("the snapshot test passed on a planted rename")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {_REGENERATE}")
    SNAPSHOT.write_text("\n".join(surface_lines()) + "\n")
    print(f"wrote {len(surface_lines())} lines to {SNAPSHOT}")
