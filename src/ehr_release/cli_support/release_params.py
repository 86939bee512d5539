"""``ehr-release verify``: the algorithm and parameters a published release declares.

Found (issue 34): ``verify`` asked for k and m although the release's own ``manifest.json``
states them, and a researcher who typed other values checked another claim than the one
published. The manifest's algorithm and parameters are the defaults; what the command line
gives wins (to check a stronger claim). Parameters that name a file on the site's machine
(a configuration, a population) are published as a bare file name, which says nothing here:
they must be given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ehr_release.core.errors import EhrReleaseError, InputError

if TYPE_CHECKING:
    from ehr_release.registry import AlgorithmEntry


@dataclass(frozen=True)
class Declared:
    """What a release's manifest declares (empty when it has none)."""

    algorithm: str | None
    parameters: dict[str, Any]
    manifest: Path | None


def declared(release: Path) -> Declared:
    """The manifest beside a release file, or in a published release folder."""
    manifest = release / "manifest.json" if release.is_dir() else release.parent / "manifest.json"
    if not manifest.is_file():
        return Declared(None, {}, None)
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        raise InputError("manifest.json cannot be read as JSON", file=str(manifest)) from None
    params = data.get("parameters") if isinstance(data, dict) else None
    algorithm = data.get("algorithm") if isinstance(data, dict) else None
    return Declared(algorithm if isinstance(algorithm, str) else None,
                    params if isinstance(params, dict) else {}, manifest)


def release_parameters(release: Path, algorithm: str | None, given: dict[str, str]
                       ) -> tuple[AlgorithmEntry, dict[str, Any], list[str]]:
    """The registry entry, the parsed parameters, and the names taken from the manifest."""
    from ehr_release import registry

    found = declared(release)
    if algorithm is None:
        if found.algorithm is None:
            raise EhrReleaseError("give --algorithm: the release has no manifest.json naming "
                                  "the algorithm that made it")
        algorithm = found.algorithm
    elif found.algorithm is not None and found.algorithm != algorithm:
        raise EhrReleaseError(f"the release's manifest says it was made by "
                              f"{found.algorithm!r}, not {algorithm!r}")
    entry = registry.get(algorithm)
    names = {p.name for p in entry.params}
    taken = {k: v for k, v in found.parameters.items()
             if k in names and k not in entry.site_paths and k not in given and v is not None}
    return entry, entry.parse({**taken, **given}), sorted(taken)


def verdict_line(algorithm: str, release: Path, holds: bool, failed: list[tuple[str, str]],
                 params: dict[str, Any], from_manifest: list[str]) -> str:
    """One line for stderr: whether the guarantee holds, under which parameters."""
    shown = ", ".join(f"{k}={params[k]}" for k in sorted(params)
                      if params[k] is not None and k != "seed")
    origin = f"; {', '.join(from_manifest)} from its manifest" if from_manifest else ""
    if holds:
        return f"verified: the {algorithm} release {release} holds ({shown}{origin})"
    first, required = failed[0] if failed else ("the verification", "")
    more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
    return (f"NOT verified: the {algorithm} release {release} fails {first}"
            f"{f' (required: {required})' if required else ''}{more} ({shown}{origin})")
