"""Griffe extension for the API reference.

* Read a Google-style ``Example:`` section as ``Examples:``: the docstrings title their doctested
  example ``Example:`` (singular), which griffe's Google parser does not know; it would render the
  doctest's output lines as Markdown.
* A module that declares ``__all__`` documents exactly those names: under dynamic inspection
  (needed because ``jaxsample.kernels`` is installed from another folder, which static analysis
  cannot follow) a module's imports would otherwise show as its members.
"""

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)

    def on_module_members(self, *, mod: griffe.Module, **kwargs) -> None:
        exports = getattr(mod, "exports", None)
        if not exports:
            return
        names = {name if isinstance(name, str) else getattr(name, "name", str(name))
                 for name in exports}
        for name in list(mod.members):
            member = mod.members[name]
            # submodules stay (their pages list them); an alias is never resolved here
            if name not in names and (member.is_alias or not member.is_module):
                del mod.members[name]
