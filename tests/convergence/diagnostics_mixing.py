"""The mixing diagnostics have no convergence budget: their one budget-like knob is a cap."""

ENTRIES = []

NO_BUDGET = {
    "diagnostics.mixing.first_passage_steps": (
        "max_steps censors the hitting times (a chain not in the target by then is reported in "
        "FirstPassageInfo.censored, with a lower bound): a cap on an exact simulation, not a "
        "budget that drives an error to a floor"),
}
