"""The four-eyes rule: whoever requested a release may not decide it.

One function holds the rule, so the command line, the dashboard and the database's own
refusal (:func:`ehr_release.storage.runs.decide`) cannot drift apart. It lives with
storage, the lowest layer that applies it; :mod:`ehr_release.governance.identity` re-exports it.
"""

from __future__ import annotations


def same_person(requester: str, reviewer: str) -> bool:
    """The four-eyes rule's test: names compared without case or surrounding space."""
    return requester.strip().casefold() == reviewer.strip().casefold()
