"""Griffe extension for the API reference: read a Google-style ``Example:`` section as ``Examples:``.

The docstrings title their doctested example ``Example:`` (singular); griffe's Google parser knows
only ``Examples:`` and would render the doctest's output lines as Markdown.
"""

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
