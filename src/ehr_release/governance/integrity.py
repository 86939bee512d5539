"""``audit verify``: the audit chain is intact, anchored, and agrees with the tables and files.

The chain alone proves only that nobody without the audit key rewrote it. The rest of the
database is plain rows anyone with database access can edit, and the newest events can be
deleted leaving a shorter, still valid chain. So one pass over the chain also checks:

* the head files (:mod:`ehr_release.storage.anchors`: the home's, and the site's second one
  if configured): every anchored event is still there with the same hash — fewer events than
  the last anchor means the chain was truncated — and the chain's newest event is anchored;
  a keyed chain whose head file is missing fails;
* every published ``manifest.json``: its ``audit_head_at_certification`` is an event of this
  chain, and its hash is the one the ``run.published`` event recorded;
* ``release_runs``: every run's status is the last ``run.<status>`` event the chain holds
  for it (and every run the chain knows still exists);
* ``approvals``: every row's reviewer, decision and reason are those of the decision event;
* the four-eyes rule on the chain itself: nobody decided a run that the chain says they
  requested;
* every column a decision reads: a run's requester, algorithm and parameters are those of its
  ``run.requested`` event; every user's role and credential are those of the chain's user
  events, and every user row was added through the chain (:mod:`.storage.chained`).
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import cap
from ehr_release.core.files import sha256_file
from ehr_release.governance.identity import same_person
from ehr_release.storage.actions import AuditAction, status_action
from ehr_release.storage.anchors import Anchor, anchor_paths, read_anchors
from ehr_release.storage.audit import MAX_PAYLOAD_STRING, capped, verify_chain
from ehr_release.storage.chained import credential_digest
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import Approval, AuditEvent, ReleaseRun, User
from ehr_release.storage.runs import Status, list_artifacts, list_runs

MANIFEST = "manifest.json"
_STATUS_ACTIONS = {status_action(s): str(s) for s in Status}
_MAX_LISTED = 20  # problems of one kind listed before "… and N more"


@dataclass
class _ChainFacts:
    """What the cross-checks need from the chain, gathered while it is verified."""

    wanted_seqs: set[int]
    wanted_hashes: set[str]
    hash_at: dict[int, str] = field(default_factory=dict)
    seq_of: dict[str, int] = field(default_factory=dict)
    last_status: dict[str, str] = field(default_factory=dict)
    decisions: dict[str, AuditEvent] = field(default_factory=dict)
    published: dict[str, dict[str, Any]] = field(default_factory=dict)
    requested: dict[str, AuditEvent] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    keyed: bool = False

    def visit(self, ev: AuditEvent) -> None:
        if ev.seq in self.wanted_seqs:
            self.hash_at[ev.seq] = ev.hash
        if ev.hash in self.wanted_hashes:
            self.seq_of[ev.hash] = ev.seq
        self.keyed = self.keyed or ev.hash.startswith("v2:")
        if ev.action == AuditAction.RUN_REQUESTED and ev.run_id is not None:
            self.requested.setdefault(ev.run_id, ev)
        elif ev.action in (AuditAction.USER_ADDED, AuditAction.USER_ROLE_CHANGED):
            self._user(ev)
        status = _STATUS_ACTIONS.get(ev.action)
        if status is None or ev.run_id is None:
            return
        self.last_status[ev.run_id] = status
        payload = json.loads(ev.payload_json)
        if "decision" in payload:
            self.decisions[ev.run_id] = ev
        if status == Status.PUBLISHED:
            self.published[ev.run_id] = payload

    def _user(self, ev: AuditEvent) -> None:
        payload = json.loads(ev.payload_json)
        name = payload.get("name")
        if not isinstance(name, str):
            return
        before = self.users.get(name)
        if ev.action == AuditAction.USER_ROLE_CHANGED and before is None:
            self.users[name] = {"role": payload.get("role"), "credential": None,
                                "added": False, "seq": ev.seq}
            return
        self.users[name] = {"role": payload.get("role"),
                            "credential": payload.get("credential_sha256")
                            or (before or {}).get("credential"),
                            "added": True, "seq": ev.seq}


def check_integrity(engine: Engine | None = None) -> tuple[list[str], str]:
    """Return (problems, one-line summary); no problems means everything checks out."""
    engine = engine or get_engine()
    problems: list[str] = []
    places = {path: read_anchors(engine, path) for path in anchor_paths()}
    anchors = [a for found in places.values() for a in found]
    # The filed (internal) certificate is checked like the published files: it is the
    # governance record the decision rests on.
    published = (list_artifacts(kind="published", engine=engine)
                 + list_artifacts(kind="certificate", engine=engine))
    manifests = _manifest_heads(published, problems)
    facts = _ChainFacts({a.seq for a in anchors}, {head for _, head in manifests.values()})
    chain = verify_chain(engine, visit=facts.visit)
    if not chain.ok:
        problems.append(f"audit chain broken: {chain.problem}")
    for path, found in places.items():
        problems += _check_anchors(found, chain.events, facts, complete=chain.ok)
        if chain.ok:
            problems += _check_coverage(path, found, chain.events, facts)
    for art in published:
        path = Path(art.path)
        if not path.exists() and not path.is_symlink():
            problems.append(f"{art.run_id}: published file {path} is missing")
        elif (kind := _not_regular(path)) is not None:
            problems.append(f"{art.run_id}: published file {path} is a {kind}, not a regular "
                            "file")
        elif sha256_file(path) != art.sha256:
            problems.append(f"{art.run_id}: published file {path} differs from its recorded "
                            f"SHA-256 {art.sha256[:16]}…")
    problems += unrecorded_files(published)
    if chain.ok:  # against a broken chain every later fact would be reported twice
        problems += _check_manifests(manifests, published, facts)
        problems += _check_tables(engine, facts)
    problems += unrecorded_release_folders(engine=engine)
    legacy = f" ({chain.legacy} unkeyed legacy)" if chain.legacy else ""
    summary = (f"audit chain: {chain.events} events{legacy}, head {chain.head[:16]}…; "
               f"anchors checked: {len(anchors)}; "
               f"published files checked: {len(published)}; "
               + ("all intact" if not problems else f"{len(problems)} problem(s)"))
    return problems, summary


def _manifest_heads(published: list[Any], problems: list[str]) -> dict[str, tuple[Path, str]]:
    """run id → (manifest path, audit head it names) for every readable published manifest."""
    heads: dict[str, tuple[Path, str]] = {}
    for art in published:
        path = Path(art.path)
        if art.kind != "published" or path.name != MANIFEST or not path.exists():
            continue
        try:
            head = json.loads(path.read_text(encoding="utf-8"))["audit_head_at_certification"]
        except (OSError, ValueError, KeyError, TypeError):
            problems.append(f"{art.run_id}: {path} names no audit head")
            continue
        heads[art.run_id] = (path, str(head))
    return heads


def _check_anchors(anchors: list[Any], events: int, facts: _ChainFacts, *,
                   complete: bool) -> list[str]:
    """Every head-file anchor must still be in the chain, with the same hash."""
    problems: list[str] = []
    beyond = [a for a in anchors if a.seq > events]
    if beyond and complete:
        last = max(beyond, key=lambda a: a.seq)
        problems.append(f"audit chain truncated: it ends at event {events} but the head file "
                        f"recorded event {last.seq} ({last.hash[:16]}…) at {last.at}")
    wrong = [a for a in anchors if a.seq <= events and facts.hash_at.get(a.seq) != a.hash]
    for a in wrong[:_MAX_LISTED]:
        problems.append(f"audit chain rewritten: event {a.seq} is "
                        f"{facts.hash_at.get(a.seq, '?')[:16]}…, the head file recorded "
                        f"{a.hash[:16]}… at {a.at}")
    if len(wrong) > _MAX_LISTED:
        problems.append(f"… and {len(wrong) - _MAX_LISTED} more rewritten anchors")
    return problems


def _check_coverage(path: Path, anchors: list[Anchor], events: int,
                    facts: _ChainFacts) -> list[str]:
    """A keyed chain's head file must exist and anchor the chain's newest event.

    Every commit is anchored, so events after the last anchor are events some head file
    lost (a shortened or replaced file), or the newest event of a process killed between
    its commit and its line — the next event's anchor covers that one.
    """
    if not facts.keyed or events == 0:
        return []
    if not path.exists():
        return [f"audit head file {path} is missing: the keyed chain's {events} events are "
                "anchored nowhere (deleted or moved?)"]
    last = max((a.seq for a in anchors), default=0)
    if last < events:
        return [f"audit head file {path} ends at event {last} but the chain has {events}: "
                f"{events - last} newest event(s) are anchored nowhere (a shortened head file, "
                "or a writer killed right after its commit)"]
    return []


def _check_manifests(manifests: dict[str, tuple[Path, str]], published: list[Any],
                     facts: _ChainFacts) -> list[str]:
    """Each manifest's head is in the chain; each published run's manifest is the recorded one."""
    problems = [f"{run_id}: {path} names audit head {head[:16]}…, which is not in the chain"
                for run_id, (path, head) in manifests.items() if head not in facts.seq_of]
    recorded = {(a.run_id, a.sha256) for a in published
                if a.kind == "published" and Path(a.path).name == MANIFEST}
    for run_id, payload in facts.published.items():
        digest = payload.get("manifest_sha256")
        if digest and (run_id, digest) not in recorded:
            problems.append(f"{run_id}: the chain records a published manifest "
                            f"{str(digest)[:16]}… that no published artifact matches")
    return problems


def _check_tables(engine: Engine, facts: _ChainFacts) -> list[str]:
    """``release_runs`` and ``approvals`` must say what the chain recorded."""
    problems: list[str] = []
    with Session(engine) as s:
        run_rows = {r.id: r for r in s.exec(select(ReleaseRun)).all()}
        approvals = list(s.exec(select(Approval)).all())
        user_rows = list(s.exec(select(User)).all())
    problems += _check_requests(run_rows, facts)
    problems += _check_four_eyes(facts)
    problems += _check_users(user_rows, facts)
    for run_id, run in sorted(run_rows.items()):
        chained = facts.last_status.get(run_id)
        if chained is None:
            problems.append(f"{run_id}: run is {run.status} but the audit chain never "
                            "recorded it")
        elif run.status != chained:
            problems.append(f"{run_id}: run is {run.status} in the database but the audit "
                            f"chain last recorded {chained}")
    for run_id in sorted(set(facts.last_status) - set(run_rows)):
        problems.append(f"{run_id}: the audit chain records this run ({facts.last_status[run_id]}) "
                        "but release_runs has no row for it")
    decided = set()
    for row in approvals:
        decided.add(row.run_id)
        ev = facts.decisions.get(row.run_id)
        if ev is None:
            problems.append(f"{row.run_id}: approval by {row.reviewer!r} has no decision event "
                            "in the audit chain")
            continue
        payload = json.loads(ev.payload_json)
        chained_row = (payload.get("reviewer", ev.actor), payload.get("decision"),
                       payload.get("reason"))
        row_values = (row.reviewer, row.decision, _as_recorded(row.reason))
        for name, chained_value, value in zip(("reviewer", "decision", "reason"),
                                              chained_row, row_values, strict=True):
            if chained_value != value:
                problems.append(f"{row.run_id}: approval {name} is {_short(value)} but the "
                                f"audit chain recorded {_short(chained_value)} (event {ev.seq})")
    for run_id in sorted(set(facts.decisions) - decided):
        problems.append(f"{run_id}: the audit chain records a decision "
                        f"(event {facts.decisions[run_id].seq}) but approvals has no row")
    return problems


def _check_requests(run_rows: dict[str, ReleaseRun], facts: _ChainFacts) -> list[str]:
    """Each run's requester, algorithm and parameters are those its ``run.requested`` event
    recorded: the decision's four-eyes test and the publication read them."""
    problems: list[str] = []
    for run_id, run in sorted(run_rows.items()):
        ev = facts.requested.get(run_id)
        if ev is None:
            problems.append(f"{run_id}: the audit chain has no run.requested event for it")
            continue
        payload = json.loads(ev.payload_json)
        chained = {"requester": ev.actor, "algorithm": payload.get("algorithm"),
                   "parameters": payload.get("parameters")}
        shown = {"requester": run.requester, "algorithm": run.algorithm,
                 "parameters": capped(json.loads(run.parameters_json))}
        for name in ("requester", "algorithm", "parameters"):
            if canonical_json(shown[name]) != canonical_json(chained[name]):
                problems.append(f"{run_id}: run {name} is {_short(shown[name])} in the database "
                                f"but the audit chain recorded {_short(chained[name])} "
                                f"(event {ev.seq})")
    return problems


def _check_four_eyes(facts: _ChainFacts) -> list[str]:
    """The chain itself must never show one person requesting and deciding a run."""
    problems = []
    for run_id, decided in sorted(facts.decisions.items()):
        requested = facts.requested.get(run_id)
        payload = json.loads(decided.payload_json)
        decider = str(payload.get("reviewer", decided.actor))
        if requested is not None and same_person(requested.actor, decider):
            problems.append(f"{run_id}: four-eyes rule broken: {requested.actor!r} requested "
                            f"the run (event {requested.seq}) and {decider!r} decided it "
                            f"(event {decided.seq})")
    return problems


def _check_users(user_rows: list[User], facts: _ChainFacts) -> list[str]:
    """Every user row is one the chain added, with the chain's role and credential."""
    problems = []
    rows = {u.name: u for u in user_rows}
    for name, user in sorted(rows.items()):
        known = facts.users.get(name)
        if known is None or not known["added"]:
            problems.append(f"user {name!r} is in users but the audit chain never added them")
            continue
        if user.role != known["role"]:
            problems.append(f"user {name!r} has role {user.role!r} in the database but the "
                            f"audit chain recorded {known['role']!r} (event {known['seq']})")
        digest = known["credential"]
        if digest is not None and credential_digest(user.credential_hash) != digest:
            problems.append(f"user {name!r}: the stored credential is not the one the audit "
                            "chain recorded when the user was added")
    for name in sorted(set(facts.users) - set(rows)):
        problems.append(f"user {name!r} was added in the audit chain but users has no row")
    return problems


def _as_recorded(reason: str) -> str:
    """The reason as the audit payload holds it (long strings are capped there)."""
    return cap(reason, MAX_PAYLOAD_STRING)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…'"


def _not_regular(path: Path) -> str | None:
    """What ``path`` is if not a regular file (a link to one included: a link can point
    anywhere, and hashing a FIFO would block), else None."""
    from ehr_release.privacy.release_tree import entry_kind

    mode = path.lstat().st_mode
    if stat.S_ISREG(mode):
        return None
    return entry_kind(mode, top=True, name=path.name)


def unrecorded_files(published: list[Any]) -> list[str]:
    """Entries of a published folder's whole tree that are not its recorded files.

    A published folder is exactly what was verified, approved and recorded; a file put in
    beside them afterwards reaches the recipient unverified. Hidden names, subfolders and
    everything in them, links, FIFOs and empty folders count too — the walk is the closed
    world's (:func:`~ehr_release.privacy.release_tree.walk_release`), links not followed.
    """
    from ehr_release.privacy.release_tree import tree_entries

    recorded: dict[Path, set[str]] = {}
    run_of: dict[Path, str] = {}
    for art in published:
        if art.kind == "published":
            path = Path(art.path)
            recorded.setdefault(path.parent, set()).add(path.name)
            run_of[path.parent] = art.run_id
    problems = []
    for folder, names in recorded.items():
        if not folder.is_dir():
            continue
        extras = [(e.path, e.kind) for e in tree_entries(folder)
                  if not (e.top and e.path in names)]  # a recorded name: checked above
        for extra, kind in extras:
            problems.append(f"{run_of[folder]}: {folder / extra} ({kind}) is in the published "
                            "folder but not recorded as published")
    return problems


def unrecorded_release_folders(limit: int = 10_000,
                               engine: Engine | None = None) -> list[str]:
    """Release folders on disk whose run the database does not show as published.

    Such a folder can only come from a publish killed between renaming and recording, or
    from someone copying files in by hand; either way researchers must not take it.
    """
    problems = []
    for run in list_runs(limit=limit, engine=engine):
        folder = Path(run.out_dir) / "releases" / run.id
        if folder.exists() and run.status != Status.PUBLISHED:
            problems.append(f"{run.id}: release folder {folder} exists but the run is "
                            f"{run.status}, not published")
    return problems
