"""XLA_FLAGS for the interpreters the tests start."""

import os


def flags_without(*fragments: str) -> list[str]:
    """This process's XLA_FLAGS less every flag that contains one of ``fragments``."""
    return [flag for flag in os.environ.get("XLA_FLAGS", "").split()
            if not any(fragment in flag for fragment in fragments)]
