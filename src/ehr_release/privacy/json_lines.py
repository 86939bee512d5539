"""Strict reading of a per-patient release: a JSON Lines records file and a JSON metadata file.

Shared by the verifiers of the releases shaped this way (GCCens, LDA), with the check that
such a release holds each patient exactly once; each verifier checks the values of its own
fields. Anything that is not exactly the published shape raises
:class:`MalformedRelease`, which a verifier turns into a failed "release format" check.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from ehr_release.model.reports import Requirement


class MalformedRelease(ValueError):
    """The release's bytes are not in the published shape."""


def _listing(keys: tuple[str, ...]) -> str:
    return ", ".join(keys[:-1]) + " and " + keys[-1] if len(keys) > 1 else keys[0]


def release_lines(files: Mapping[str, bytes], records_file: str, meta_file: str,
                  keys: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of ``records_file``.

    Each line must be a JSON object with exactly ``keys``; both files must be present.
    """
    if records_file not in files or meta_file not in files:
        raise MalformedRelease(f"release must hold {records_file} and {meta_file}; got "
                               f"{sorted(files)}")
    for no, line in enumerate(files[records_file].decode("utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MalformedRelease(f"line {no} is not JSON: {exc}") from None
        if not isinstance(obj, dict) or set(obj) != set(keys):
            raise MalformedRelease(f"line {no} must have exactly {_listing(keys)}")
        yield no, obj


def release_meta(files: Mapping[str, bytes], meta_file: str) -> dict[str, Any]:
    """The metadata file as a JSON object."""
    try:
        meta = json.loads(files[meta_file])
    except json.JSONDecodeError as exc:
        raise MalformedRelease(f"{meta_file} is not JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise MalformedRelease(f"{meta_file} must be a JSON object")
    return meta


def one_record_each(name: str, required: str, expected: Collection[str],
                    released: Sequence[str], show: int) -> Requirement:
    """Requirement ``name``: every ``expected`` id appears in ``released`` exactly once.

    The evidence names up to ``show`` missing and unknown ids.
    """
    expected, distinct = set(expected), set(released)
    missing = sorted(expected - distinct)
    extra = sorted(distinct - expected)
    repeated = len(released) - len(distinct)
    return Requirement(
        name, required,
        f"{len(missing)} missing, {len(extra)} unknown, {repeated} repeated",
        not missing and not extra and not repeated,
        {"missing": missing[:show], "unknown": extra[:show]})
