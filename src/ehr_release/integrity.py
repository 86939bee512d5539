"""``audit verify``: the audit chain is intact and every published file is unchanged."""

from __future__ import annotations

from pathlib import Path

from ehr_release.files import sha256_file
from ehr_release.storage.audit import verify_chain
from ehr_release.storage.runs import Status, list_artifacts, list_runs


def check_integrity() -> tuple[list[str], str]:
    """Return (problems, one-line summary); no problems means everything checks out."""
    problems: list[str] = []
    chain = verify_chain()
    if not chain.ok:
        problems.append(f"audit chain broken: {chain.problem}")
    # The filed (internal) certificate is checked like the published files: it is the
    # governance record the decision rests on.
    published = list_artifacts(kind="published") + list_artifacts(kind="certificate")
    for art in published:
        path = Path(art.path)
        if not path.exists():
            problems.append(f"{art.run_id}: published file {path} is missing")
        elif sha256_file(path) != art.sha256:
            problems.append(f"{art.run_id}: published file {path} differs from its recorded "
                            f"SHA-256 {art.sha256[:16]}…")
    problems += unrecorded_release_folders()
    summary = (f"audit chain: {chain.events} events, head {chain.head[:16]}…; "
               f"published files checked: {len(published)}; "
               + ("all intact" if not problems else f"{len(problems)} problem(s)"))
    return problems, summary


def unrecorded_release_folders(limit: int = 10_000) -> list[str]:
    """Release folders on disk whose run the database does not show as published.

    Such a folder can only come from a publish killed between renaming and recording, or
    from someone copying files in by hand; either way researchers must not take it.
    """
    problems = []
    for run in list_runs(limit=limit):
        folder = Path(run.out_dir) / "releases" / run.id
        if folder.exists() and run.status != Status.PUBLISHED:
            problems.append(f"{run.id}: release folder {folder} exists but the run is "
                            f"{run.status}, not published")
    return problems
