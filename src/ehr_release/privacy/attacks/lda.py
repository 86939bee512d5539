"""The LDA adversary: knows a target's whole trajectory, holds the published bytes.

k-anonymity of trajectories assumes an attacker who knows the target's sequence of (ICD code,
age) pairs. Such an attacker keeps as candidates every published record that could be the
target's: its trajectory must generalize the target's in order (each published pair matched,
in order, to a distinct pair of the target whose code it is an ancestor-or-self of and whose
age lies in its block; unmatched pairs of the target were suppressed). A release fails when
some patient has fewer than k candidates.

One knowledge set per patient, every patient (exhaustive): an attacker knowing only part of
the trajectory (a prefix, any sub-sequence) keeps every record that generalizes the whole
trajectory — the whole trajectory is itself a completion of the part — so partial knowledge
only enlarges candidate sets and the whole trajectory is the strongest set to try.

Every other published field is read as an adversary would:

* ``patient_id`` is a keyed pseudonym the attacker cannot compute, so it narrows nothing —
  provided the lines are ordered by it; lines in any other order could carry the extract's
  order (admission or MRN order), so an unordered file fails the audit.
* The bytes of each line must be the canonical rendering of its two fields: spacing or key
  order varying from line to line could carry a bit per record that no field declares.
* ``lda.json`` holds parameters and two release-wide averages; it must be canonical too.

Nothing here comes from ``ehr_release.algorithms`` or from the LDA verifier: the bytes are
parsed here (a plainly canonical file is matched against the canonical-rendering pattern of
:mod:`ehr_release.privacy.canonical_lines`, which the closed world also uses, and cut), ICD
ancestry is walked on the shared hierarchy's parent links, and the in-order test is a greedy
scan (taking the earliest matching pair is optimal for embedding a sequence into another
under a per-pair predicate), vectorized over the (trajectory, published
trajectory) combinations that pass a necessary covering filter. Exact counts are computed in
increasing order of a cheap lower bound and stop once no remaining patient can change the
answer (:func:`_smallest`), so a correct release costs little more than reading it.
"""

from __future__ import annotations

import json
import operator
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from ehr_release.model.hierarchy import Hierarchy, code_hierarchy
from ehr_release.model.reports import AttackReport
from ehr_release.privacy.canonical_lines import forget as forget_match
from ehr_release.privacy.canonical_lines import lines_match
from ehr_release.privacy.closed_world import ListOf, Obj, TupleOf
from ehr_release.privacy.json_columns import paused_gc

if TYPE_CHECKING:
    from ehr_release.model.dataset import Dataset

RECORDS_FILE = "trajectories.jsonl"
META_FILE = "lda.json"
KEYS = ["patient_id", "trajectory"]
ATTACKER = ("knows a target's whole trajectory of (ICD code, age) pairs and reads every "
            "published field and byte of the release")

PubPair = tuple[str, int, int]  # (ICD node, first age, last age)
_LINE = Obj({"patient_id": "str", "trajectory": ListOf(TupleOf(("str", TupleOf(("int", "int")))))})
# a line that matches _LINE's canonical pattern: its pseudonym and its trajectory's text
_CUT = re.compile(r'^\{"patient_id": "([^"]*)", "trajectory": (.*)\}$', re.M)
_canonical = partial(json.dumps, ensure_ascii=False)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class _Unreadable(ValueError):
    """The release is not in the shape this attack reads (no value in the message)."""


def attack(files: Mapping[str, bytes], original: Dataset, params: dict[str, Any]
           ) -> AttackReport:
    """The registry's attack audit of an ``lda`` / ``lda-baseline`` release."""
    return attack_trajectories(files, original.trajectories(),
                               code_hierarchy(original.code_system),
                               int(params["k"]), patient_ids=original.patient_ids)


def attack_trajectories(files: Mapping[str, bytes],
                        trajectories: Sequence[Sequence[tuple[str, int]]],
                        hierarchy: Hierarchy, k: int,
                        patient_ids: Sequence[str] | None = None) -> AttackReport:
    """Smallest candidate set over every patient's whole trajectory, plus byte-level checks.

    Parameters
    ----------
    files
        The release files as published.
    trajectories
        Every patient's (ICD code, age) pairs ordered by age then code — the attacker's
        knowledge, one set per patient.
    hierarchy
        The ICD hierarchy the release generalizes into.
    k
        The threshold: every patient must keep ≥ k candidates.
    patient_ids
        The patients' ids as the release carries them (pseudonyms), in the order of
        ``trajectories``. Not attacker knowledge: the audit only uses them to skip exact
        counts that cannot matter (see :func:`_smallest`); the result is the same without.
    """
    with paused_gc():  # acyclic values built in bulk (see json_columns.paused_gc)
        return _attack(files, trajectories, hierarchy, k, patient_ids)


def _attack(files: Mapping[str, bytes], trajectories: Sequence[Sequence[tuple[str, int]]],
            hierarchy: Hierarchy, k: int, patient_ids: Sequence[str] | None) -> AttackReport:
    n = len(trajectories)
    try:
        release = _read(files)
    except _Unreadable as exc:
        return AttackReport(ATTACKER, 0, True, None, k, False,
                            measured=f"release not readable as the LDA format: {exc}")
    side_channels = release.side_channels
    if not release.records:
        return AttackReport(ATTACKER, n, True, None, k, not side_channels,
                            measured="no published records: nobody to single out"
                            + "".join(f"; {s}" for s in side_channels))
    if not n:
        smallest, below = None, 0
    elif any(release.extras):
        smallest, below = _smallest_by_extras(release, trajectories, hierarchy, k, patient_ids)
    else:
        own = None
        if patient_ids is not None:
            by_id = dict(zip(release.pids, release.records, strict=True))
            own = [by_id.get(pid) for pid in patient_ids]
        smallest, below = _smallest(release.records, trajectories, hierarchy, k, own)
    passed = below == 0 and not side_channels
    measured = (f"smallest candidate set {smallest:,} over {n:,} knowledge sets (every "
                f"patient's whole trajectory); {below:,} patient(s) below {k}"
                if smallest is not None else "no patients to attack")
    measured += "".join(f"; side channel: {s}" for s in side_channels)
    return AttackReport(ATTACKER, n, True, smallest, k, passed, measured=measured)


# ---------------------------------------------------------------------------- the bytes
@dataclass
class _Release:
    """What the bytes hold: per record its id, trajectory and the values of any undeclared
    fields (canonical JSON, empty when there are none), and the side channels found."""

    pids: list[str] = field(default_factory=list)
    records: list[tuple[PubPair, ...]] = field(default_factory=list)
    extras: list[tuple[tuple[str, str], ...]] = field(default_factory=list)
    side_channels: list[str] = field(default_factory=list)


def _read(files: Mapping[str, bytes]) -> _Release:
    """The records as an adversary reads them, and the byte-level side channels found."""
    if RECORDS_FILE not in files:
        raise _Unreadable(f"{RECORDS_FILE} is missing")
    plain = _patterned(files[RECORDS_FILE])
    if plain is None:
        plain = _plain(files[RECORDS_FILE])
    if plain is not None:
        plain.side_channels = _meta_channels(files)
        return plain
    return _each_line(files)


def _patterned(data: bytes) -> _Release | None:
    """The release read from its bytes when every line matches the pattern of its canonical
    rendering in plain text (:mod:`ehr_release.privacy.canonical_lines`: a text pseudonym
    and a list of [ICD node, [first, last]] pairs, nothing escaped) and the pseudonyms are
    strictly increasing: what :func:`_plain` accepts, narrower. Pseudonym and trajectory are
    cut from each line, and only the distinct trajectory texts are parsed (equal texts are
    equal trajectories). None otherwise, and :func:`_plain` reads it."""
    if not data:
        return None
    matched = lines_match(data, _LINE)
    forget_match()  # hold no reference to the bytes
    if not matched:
        return None
    rows = _CUT.findall(data.decode("ascii"))
    pids = list(map(itemgetter(0), rows))
    if not all(map(operator.lt, pids, pids[1:])):
        return None
    texts = list(map(itemgetter(1), rows))
    distinct = {text: tuple((node, lo, hi) for node, (lo, hi) in orjson.loads(text))
                for text in dict.fromkeys(texts)}
    return _Release(pids=pids, records=list(map(distinct.__getitem__, texts)),
                    extras=[()] * len(pids))


def _plain(data: bytes) -> _Release | None:
    """The release read in one orjson pass when it is plainly canonical: newline-ended, no
    blank line, every line exactly the canonical rendering of a text pseudonym and a list
    of [ICD node, [first, last]] pairs, pseudonyms strictly increasing. None otherwise,
    and :func:`_each_line` reads it line by line, naming every side channel.

    Column-wise: types are compared per field as sets, never value by value in Python.
    The lines are compared with one rendering of all records (lines joined by ``", "``
    render as the list of their objects): once every value is known to be text or an
    integer, orjson's compact rendering with a space put after every comma and colon is
    ``json.dumps``' when the file holds no backslash (no escape, where the two may differ);
    a space also put inside a string with a comma or colon only makes the comparison fail,
    and any failure is re-decided by ``json.dumps`` itself."""
    if not data.endswith(b"\n"):
        return None
    raw = data[:-1].split(b"\n")
    try:
        objs = list(map(orjson.loads, raw))
    except orjson.JSONDecodeError:
        return None
    if set(map(type, objs)) - {dict} or set(map(tuple, objs)) - {tuple(KEYS)}:
        return None
    pids = list(map(itemgetter("patient_id"), objs))
    trajs = list(map(itemgetter("trajectory"), objs))
    if set(map(type, pids)) - {str} or not all(map(operator.lt, pids, pids[1:])):
        return None
    if set(map(type, trajs)) - {list}:
        return None
    flat = list(chain.from_iterable(trajs))
    if set(map(type, flat)) - {list} or set(map(len, flat)) - {2}:
        return None
    nodes, blocks = list(map(itemgetter(0), flat)), list(map(itemgetter(1), flat))
    if set(map(type, nodes)) - {str} or set(map(type, blocks)) - {list} \
            or set(map(len, blocks)) - {2}:
        return None
    ages = list(chain.from_iterable(blocks))
    if set(map(type, ages)) - {int}:
        return None
    if not _canonical_lines(data[:-1], raw, objs):
        return None
    pairs = iter(zip(nodes, ages[0::2], ages[1::2], strict=True))
    records = [tuple(islice(pairs, n)) for n in map(len, trajs)]
    return _Release(pids=pids, records=records, extras=[()] * len(pids))


def _canonical_lines(body: bytes, raw: list[bytes], objs: list[dict[str, Any]]) -> bool:
    """Whether every line is ``json.dumps(obj, ensure_ascii=False)`` (values are text and
    integers only)."""
    if b"\\" not in body:
        spaced = orjson.dumps(objs).replace(b",", b", ").replace(b":", b": ")
        if spaced == b"[" + body.replace(b"\n", b", ") + b"]":
            return True
    return list(map(_canonical, objs)) == [line.decode("utf-8") for line in raw]


def _meta_channels(files: Mapping[str, bytes]) -> list[str]:
    if META_FILE not in files:
        return []
    try:
        meta = json.loads(files[META_FILE])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _Unreadable(f"{META_FILE} is not JSON") from None
    canonical = (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()
    return [] if canonical == files[META_FILE] else [
        f"{META_FILE} is not the canonical rendering of its fields"]


def _each_line(files: Mapping[str, bytes]) -> _Release:
    try:
        text = files[RECORDS_FILE].decode("utf-8")
    except UnicodeDecodeError:
        raise _Unreadable(f"{RECORDS_FILE} is not UTF-8") from None
    lines = text.split("\n")
    found: set[str] = set()
    if lines[-1] == "":
        lines.pop()
    elif text:
        found.add("the records file does not end with a newline")
    out = _Release()
    previous: str | None = None
    for line in lines:
        if not line.strip():
            found.add("blank lines between records (their places can carry bits)")
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise _Unreadable("a line is not JSON") from None
        if not isinstance(obj, dict) or not set(KEYS) <= set(obj):
            raise _Unreadable("a line does not hold patient_id and trajectory")
        if list(obj)[:len(KEYS)] != KEYS:
            found.add("key order varies between lines")
        extra = tuple(sorted((key, json.dumps(value, sort_keys=True))
                             for key, value in obj.items() if key not in KEYS))
        if extra:
            found.add("records carry undeclared fields (taken as computable from the "
                      "target's data: candidates must share their values)")
        pid = obj["patient_id"]
        if not isinstance(pid, str):
            raise _Unreadable("a patient_id is not text")
        out.records.append(_trajectory(obj["trajectory"]))
        out.pids.append(pid)
        out.extras.append(extra)
        if json.dumps(obj, ensure_ascii=False) != line:
            found.add("a line is not the canonical rendering of its fields (spacing, escapes "
                      "or number formats can carry per-record bits)")
        if previous is not None and pid <= previous:
            found.add("lines are not in strictly increasing pseudonym order (the order can "
                      "carry the extract's order)")
        previous = pid
    if META_FILE in files:
        try:
            meta = json.loads(files[META_FILE])
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise _Unreadable(f"{META_FILE} is not JSON") from None
        canonical = (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()
        if canonical != files[META_FILE]:
            found.add(f"{META_FILE} is not the canonical rendering of its fields")
    out.side_channels = sorted(found)
    return out


def _trajectory(value: object) -> tuple[PubPair, ...]:
    if not isinstance(value, list):
        raise _Unreadable("a trajectory is not a list")
    out = []
    for item in value:
        ok = (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
              and isinstance(item[1], list) and len(item[1]) == 2
              and all(isinstance(a, int) and not isinstance(a, bool) for a in item[1]))
        if not ok:
            raise _Unreadable("a pair is not [ICD node, [first age, last age]]")
        if not all(_INT64_MIN <= a <= _INT64_MAX for a in item[1]):  # no age is that big
            raise _Unreadable("an age is beyond 64 bits")
        out.append((item[0], item[1][0], item[1][1]))
    return tuple(out)


# ----------------------------------------------------------------------- candidate sets
_CHUNK = 1 << 24  # bytes of one (trajectories × groups × pairs) filter batch


class _Originals:
    """The distinct attacker trajectories, flattened: one row per (code, age) position."""

    def __init__(self, trajectories: Sequence[Sequence[tuple[str, int]]]) -> None:
        index: dict[tuple[tuple[str, int], ...], int] = {}
        self.of_patient = np.array([index.setdefault(tuple(t), len(index))
                                    for t in trajectories], dtype=np.int64)
        distinct = list(index)
        self.distinct = distinct
        flat = list(chain.from_iterable(distinct))
        codes = list(map(itemgetter(0), flat))
        code_id = {c: i for i, c in enumerate(dict.fromkeys(codes))}
        self.code = np.fromiter(map(code_id.__getitem__, codes), dtype=np.int64,
                                count=len(flat))
        self.age = np.fromiter(map(itemgetter(1), flat), dtype=np.int64, count=len(flat))
        self.lengths = np.array([len(t) for t in distinct], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64) \
            if distinct else np.zeros(0, dtype=np.int64)
        self.codes = list(code_id)

    def __len__(self) -> int:
        return len(self.lengths)


class _Published:
    """The distinct published trajectories (groups) and their distinct (node, block) pairs."""

    def __init__(self, records: list[tuple[PubPair, ...]]) -> None:
        groups = Counter(records)
        self.empty = sum(n for t, n in groups.items() if not t)  # generalize everyone
        trajs = [t for t in groups if t]
        self.sizes = np.array([groups[t] for t in trajs], dtype=np.int64)
        self.lengths = np.array([len(t) for t in trajs], dtype=np.int64)
        pair_id: dict[PubPair, int] = {}
        self.width = int(self.lengths.max()) if trajs else 0
        self.pairs = np.zeros((len(trajs), max(self.width, 1)), dtype=np.int64)
        self.index = {t: g for g, t in enumerate(trajs)}
        for g, t in enumerate(trajs):
            for j, p in enumerate(t):
                self.pairs[g, j] = pair_id.setdefault(p, len(pair_id))
        node_id: dict[str, int] = {}
        self.node = np.array([node_id.setdefault(node, len(node_id)) for node, _, _ in pair_id],
                             dtype=np.int64)
        self.lo = np.array([lo for _, lo, _ in pair_id], dtype=np.int64)
        self.hi = np.array([hi for _, _, hi in pair_id], dtype=np.int64)
        self.nodes = list(node_id)

    def __len__(self) -> int:
        return len(self.lengths)


def _ancestry(codes: list[str], nodes: list[str], hierarchy: Hierarchy) -> np.ndarray:
    """``anc[c, n]``: published node n is the original code c or one of its ancestors."""
    where = {node: i for i, node in enumerate(nodes)}
    anc = np.zeros((len(codes), len(nodes)), dtype=bool)
    for c, code in enumerate(codes):
        for node in (code, *hierarchy.ancestors(code)):
            if node in where:
                anc[c, where[node]] = True
    return anc


def _covered(orig: _Originals, pub: _Published, anc: np.ndarray, a: int, b: int
             ) -> np.ndarray:
    """``[t - a, pair]`` for trajectories a…b−1: does the pair cover one of t's positions?

    A group can only embed into a trajectory every one of whose pairs it covers somewhere —
    a necessary condition that picks the few (trajectory, group) combinations worth the
    exact in-order test.
    """
    rows = np.zeros((b - a, len(pub.node)), dtype=bool)
    filled = np.flatnonzero(orig.lengths[a:b] > 0)
    if filled.size:
        first = int(orig.starts[a + filled[0]])
        last = int(orig.starts[a + filled[-1]] + orig.lengths[a + filled[-1]])
        ages = orig.age[first:last, None]
        cov = anc[orig.code[first:last]][:, pub.node] & (pub.lo <= ages) & (ages <= pub.hi)
        rows[filled] = np.logical_or.reduceat(cov, orig.starts[a + filled] - first, axis=0)
    return rows


def _embeds(orig: _Originals, pub: _Published, anc: np.ndarray, t: np.ndarray,
            g: np.ndarray) -> np.ndarray:
    """For each (trajectory t, group g): does g's trajectory embed, in order, into t?

    Greedy: each published pair takes the earliest remaining position it covers (optimal
    for subsequence embedding under a per-pair predicate); vectorized over the
    combinations, every pointer only moves forward, so the work is at most one step per
    (combination, position).
    """
    ptr = orig.starts[t].copy()
    end = ptr + orig.lengths[t]
    alive = np.ones(len(t), dtype=bool)
    glen = pub.lengths[g]
    for j in range(pub.width):
        act = np.flatnonzero(alive & (glen > j))
        pair = pub.pairs[g[act], j]
        while act.size:
            pos = ptr[act]
            out = pos >= end[act]
            if out.any():
                alive[act[out]] = False
                act, pair, pos = act[~out], pair[~out], pos[~out]
            ages = orig.age[pos]
            hit = anc[orig.code[pos], pub.node[pair]] & (pub.lo[pair] <= ages) & \
                (ages <= pub.hi[pair])
            ptr[act] = pos + 1
            act, pair = act[~hit], pair[~hit]
    return alive


def _exact_counts(orig: _Originals, pub: _Published, hierarchy: Hierarchy) -> np.ndarray:
    """Per distinct trajectory of ``orig``: records that generalize it in order."""
    counts = np.full(len(orig), pub.empty, dtype=np.int64)
    if not len(pub) or not len(orig):
        return counts
    anc = _ancestry(orig.codes, pub.nodes, hierarchy)
    padding = np.arange(pub.pairs.shape[1]) >= pub.lengths[:, None]  # (groups, width)
    step = max(1, _CHUNK // pub.pairs.size)
    for a in range(0, len(orig), step):
        b = min(len(orig), a + step)
        covered = _covered(orig, pub, anc, a, b)
        possible = (covered[:, pub.pairs] | padding).all(axis=2)
        possible &= orig.lengths[a:b, None] >= pub.lengths
        t, g = np.nonzero(possible)
        t += a
        ok = _embeds(orig, pub, anc, t, g)
        counts += np.bincount(t[ok], weights=pub.sizes[g[ok]], minlength=len(orig)
                              ).astype(np.int64)
    return counts


def _candidate_counts(records: list[tuple[PubPair, ...]],
                      trajectories: Sequence[Sequence[tuple[str, int]]],
                      hierarchy: Hierarchy) -> np.ndarray:
    """Per patient, how many published records generalize its whole trajectory in order."""
    orig = _Originals(trajectories)
    return _exact_counts(orig, _Published(records), hierarchy)[orig.of_patient]


def _smallest(records: list[tuple[PubPair, ...]],
              trajectories: Sequence[Sequence[tuple[str, int]]], hierarchy: Hierarchy, k: int,
              own: Sequence[tuple[PubPair, ...] | None] | None) -> tuple[int, int]:
    """(smallest candidate set, patients below k), counting exactly only where it matters.

    A patient's own record, when it generalizes the patient's trajectory, brings its whole
    group of identical records into the candidate set: a lower bound that costs one
    embedding test. Trajectories are counted exactly in increasing order of that bound, and
    the counting stops once the next bound reaches both k and the smallest exact count so
    far — every trajectory left has at least that many candidates, so neither the minimum
    nor the number of patients below k can change. Without ``own`` every bound is the
    number of empty published trajectories and all are counted.
    """
    orig, pub = _Originals(trajectories), _Published(records)
    d = len(orig)
    lower = np.full(d, pub.empty, dtype=np.int64)
    if own is not None and len(pub):
        of_patient = orig.of_patient.tolist()
        pairs = [(of_patient[i], pub.index[r]) for i, r in enumerate(own) if r]
        if pairs:
            t, g = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
            anc = _ancestry(orig.codes, pub.nodes, hierarchy)
            ok = _embeds(orig, pub, anc, t, g)
            np.maximum.at(lower, t[ok], pub.empty + pub.sizes[g[ok]])
    order = np.lexsort((orig.lengths, lower))  # short ones first: fewer groups fit
    patients = np.bincount(orig.of_patient, minlength=d)
    best: int | None = None
    below = 0
    start, size = 0, 32
    while start < d:
        if best is not None and lower[order[start]] >= max(best, k):
            break
        chunk = order[start:start + size]
        counts = _exact_counts(_Originals([orig.distinct[i] for i in chunk]), pub, hierarchy)
        best = int(counts.min()) if best is None else min(best, int(counts.min()))
        below += int(patients[chunk][counts < k].sum())
        start, size = start + size, size * 2
    return (best if best is not None else 0), below


def _smallest_by_extras(release: _Release, trajectories: Sequence[Sequence[tuple[str, int]]],
                        hierarchy: Hierarchy, k: int, patient_ids: Sequence[str] | None
                        ) -> tuple[int, int]:
    """(smallest candidate set, patients below k) when records carry undeclared fields.

    The worst case: the adversary can compute those values from the target's data, so the
    candidates are the records that generalize the target's trajectory *and* show the same
    undeclared values as the target's own record. Without the ids (no own record known),
    every set of values the target could show is tried and the smallest non-empty count
    kept.
    """
    parts: dict[tuple[tuple[str, str], ...], list[tuple[PubPair, ...]]] = defaultdict(list)
    for record, extra in zip(release.records, release.extras, strict=True):
        parts[extra].append(record)
    n = len(trajectories)
    counts = np.zeros(n, dtype=np.int64)
    if patient_ids is not None:
        own = dict(zip(release.pids, release.extras, strict=True))
        members: dict[object, list[int]] = defaultdict(list)
        for i, pid in enumerate(patient_ids):
            members[own.get(pid)].append(i)
        for extra, idx in members.items():
            pool = parts.get(extra, release.records)
            counts[idx] = _candidate_counts(pool, [trajectories[i] for i in idx], hierarchy)
    else:
        counts[:] = np.iinfo(np.int64).max
        for pool in parts.values():
            c = _candidate_counts(pool, trajectories, hierarchy)
            counts = np.where(c > 0, np.minimum(counts, c), counts)
        counts[counts == np.iinfo(np.int64).max] = 0
    return int(counts.min()), int((counts < k).sum())
