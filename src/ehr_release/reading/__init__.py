"""Read a published release as a researcher would: one record per row, whatever the family.

``load_release(folder)`` finds the release's format by the files it holds and returns a
pandas frame with one row per record (a disassociated release: one random reconstruction;
DiffGen: one row per released group with its noisy count as ``weight``). The functions it
calls are the ones the datasheet prints under "Load it" (:func:`snippet`), so the
researcher's copy and this package's reader are the same code.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ehr_release.reading.loaders import (
    load_diffgen,
    load_disassociation,
    load_gccens,
    load_kkm,
    load_lda,
)

__all__ = ["load_release", "loader_for", "snippet"]

#: Release format → (a file only that format publishes, its reader).
_FORMATS: dict[str, tuple[str, Callable[..., Any]]] = {
    "disassociation": ("release.parquet", load_disassociation),
    "kkm": ("generalized_codes.parquet", load_kkm),
    "diffgen": ("cut.json", load_diffgen),
    "gccens": ("censored.jsonl", load_gccens),
    "lda": ("trajectories.jsonl", load_lda),
}


def loader_for(files: list[str] | set[str]) -> Callable[..., Any] | None:
    """The reader of a release holding ``files`` (names), or None for an unknown format."""
    return next((load for marker, load in _FORMATS.values() if marker in files), None)


def load_release(folder: str | Path, **options: Any) -> Any:
    """The release in ``folder`` as a pandas frame, one record per row.

    ``options`` go to the format's reader (``seed=`` picks another reconstruction of a
    disassociated release).

    Raises
    ------
    ValueError
        If the folder holds no release format this package knows.
    """
    folder = Path(folder)
    load = loader_for({p.name for p in folder.iterdir()} if folder.is_dir() else set())
    if load is None:
        raise ValueError(f"{folder} holds no release this package can read (expected one of "
                         f"{', '.join(m for m, _ in _FORMATS.values())})")
    return load(str(folder), **options)


def snippet(files: list[str] | set[str]) -> str | None:
    """The "Load it" code for a release holding ``files``: the reader's own source and the
    call, run in the release folder; None for an unknown format."""
    load = loader_for(files)
    if load is None:
        return None
    source = inspect.getsource(load)
    return f"{source}\n\nrecords = {load.__name__}(\".\")  # run in the release folder\n"
