"""The steps of a decision and its publication, told to whoever in this process listens.

``approve`` runs the publishing flow in its own process and used to be silent for 22–28 s
(issue 34 finding 9). The flow's code says which step it begins (:func:`step`); the CLI's
display (:class:`ehr_release.cli_support.progress.StepProgress`) listens and shows each with its
time
on stderr. With nobody listening (the dashboard, a deployment) a step costs a list lookup.
Labels are fixed words: never a value of the data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

_listeners: list[Callable[[str], None]] = []


@contextmanager
def listening(listener: Callable[[str], None]) -> Iterator[None]:
    """Call ``listener`` with the label of every step begun in the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def step(label: str) -> None:
    """A step begins: tell the listeners (a listener's own failure never stops the work)."""
    for listener in list(_listeners):
        with suppress(Exception):
            listener(label)
