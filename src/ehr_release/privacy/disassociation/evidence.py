"""How the verifier shows evidence: how many examples a report lists, how an itemset reads."""

from __future__ import annotations

#: Examples of one kind of problem listed in a report (the count is always given in full).
MAX_EVIDENCE = 5


def braces(itemset: tuple[str, ...] | None) -> str:
    """``{a, b}``: an itemset as the report prints it."""
    return "{" + ", ".join(itemset or ()) + "}"
