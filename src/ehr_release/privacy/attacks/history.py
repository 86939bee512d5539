"""The history attack: an attacker who holds every release of the same patients (issue 31).

Each release may pass its own audit while two of them together give patients away. Publish
extract E, then E minus one patient: the codes that vanish from the published vocabulary, or
whose published counts drop, are that patient's — with certainty, however well each release
hid them among k records alone. This audit plays that attacker on the published bytes of the
current release and of every earlier (published or parked) release of the same patients.

**The attacker.** Holds every release and knows, for each earlier one, how many patients the
two extracts share and how many are on each side only (the :class:`Overlap`: the model's
background knowledge includes presence, so who was added or removed is known). Reads from
each release its *published terms with counts* (:func:`published_terms`): every published
term — a code, a generalized code (a set of codes), an ICD hierarchy node, a generalized
demographic or age block — as the set of leaf codes it covers (the packaged ICD-9-CM
hierarchy; a string it does not hold stands for itself, a demographic value is a token of
its own, ``@name=value``), with the number of (record, term) occurrences the release shows.

**What the attacker concludes.** For a pair (current C, earlier E) whose extracts differ by
the groups R_E = E \\ C (``only_earlier`` patients) and R_C = C \\ E (``only_current``):

* a term shown more often in E than in C was held by someone in R_E: the patients both
  extracts hold publish it alike when counts are read at face value, and only R_E's left.
  The codes that vanished are the extreme case: a leaf code covered by E's vocabulary and
  by no term of C makes every term of E covering it absent from C (count 0), so each of
  them is attributed. Each such term of E is *attributed* to R_E;
* symmetrically, a term shown more often in C than in E is attributed to R_C.

The audit fails when some term is attributed to a group of fewer than k patients (k the
larger of the two releases' k): that group learns a code (or a chapter, a range) of
theirs, certainly for a group of one. A pair with identical patient sets attributes nothing
(no group to attribute to); a group of ≥ k patients may have terms attributed, which tells
no more about any one of them than a k-anonymous release does. The report gives the
smallest group any term was attributed to.

**Sound, and conservative where unsure.** Every certain conclusion drawn from term counts
is caught. The attacker is sure that R_E holds some code of a leaf set T only when E proves
more holders of T than C can have. From the counts, E proves at least ``count_E(S)``
holders for each of its terms S ⊆ T, and C allows at most Σ ``count_C(S')`` over its
terms S' meeting T (at face value). So some S ⊆ T has ``count_E(S) > Σ count_C(S') ≥
count_C(S)``, and S — a term inside T — is attributed to R_E. Conversely the audit
attributes where the attacker cannot be sure:

* published counts are taken at face value, as if nothing were suppressed: a count can
  drop because the algorithm re-clustered or suppressed differently, not because R_E left;
* a disassociated item chunk shows each of its codes once, without a count (each is held
  by 1 … k−1 records of the cluster): the audit counts it once, a lower bound in E and in C
  alike, so moving a code between item chunks reads as a change of count;
* generalized demographics and age blocks are terms too, though the models' adversaries
  know them: an attacker who knows only presence learns them by differencing.

So re-anonymized releases of extracts differing by fewer than k patients on a side fail
whenever anything about those patients shows — which is the point. Pairwise only: the
overlaps say nothing of three-way intersections, which the caller's linkage must
describe as pairs.

**Cost.** Each release is read once (:func:`published_terms`, a pass over one column);
``attack_history`` takes a cache of term counts keyed by run label, so checking one
release against a hundred earlier ones costs a hundred comparisons of dictionaries.

Reads only the published bytes (no ``ehr_release.algorithms``, no verifier): the formats are
those of :mod:`ehr_release.privacy.formats`. The report names no code, no value and no
patient: counts and run labels only.
"""

from __future__ import annotations

import gc
import io
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import chain

import numpy as np
import orjson

from ehr_release.model.hierarchy import Hierarchy, icd9_hierarchy
from ehr_release.model.reports import AttackReport
from ehr_release.privacy.formats import disassociation as dis_format
from ehr_release.privacy.formats import gccens as gccens_format
from ehr_release.privacy.formats import kkm as kkm_format
from ehr_release.privacy.formats import lda as lda_format

Term = frozenset[str]

#: Registry name → release format this audit reads (hyphens or underscores).
FAMILIES = {
    "disassociation": "disassociation",
    "artuc": "kkm", "artuc-baseline": "kkm", "artuc-unconstrained": "kkm", "rmr": "kkm",
    "gccens": "gccens",
    "lda": "lda", "lda-baseline": "lda",
}
#: First character of a term that is not a code: a demographic value or an age block.
PSEUDO = "@"
ATTACKER_MODEL = ("an attacker who holds every earlier release of these patients, knows who "
                  "was added or removed between them (presence), and compares the published "
                  "terms and their counts")
REQUIRED = ("no published term is attributable, by differencing this release with an "
            "earlier release of the same patients, to fewer than k patients")


class Unreadable(ValueError):
    """A release this audit cannot read as published terms (the message names no value)."""


@dataclass(frozen=True)
class HeldRelease:
    """One published (or parked) release the attacker holds."""

    label: str                      # the run id, for messages (no patient value)
    algorithm: str                  # registry name (see FAMILIES)
    files: Mapping[str, bytes]      # the release's files, name → bytes, as published
    k: int                          # the release's k


@dataclass(frozen=True)
class Overlap:
    """How two extracts' patients overlap (keyed hashes per patient, counted by the caller)."""

    shared: int          # patients in both extracts
    only_current: int    # patients of the current extract not in the earlier one
    only_earlier: int    # patients of the earlier extract not in the current one

    def __post_init__(self) -> None:
        for name in ("shared", "only_current", "only_earlier"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Overlap.{name} must be a count ≥ 0")


class TermCounts(dict[Term, int]):
    """Published terms → occurrences; ``covered`` is the release's vocabulary as leaf codes
    (computed on first use)."""

    @cached_property
    def covered(self) -> frozenset[str]:
        return frozenset().union(*self)


# --------------------------------------------------------------------------- leaf sets
@cache
def _leaves(hierarchy: Hierarchy, node: str) -> Term:
    """The leaf codes a published code or node covers; itself when the hierarchy lacks it."""
    if node in hierarchy:
        return frozenset(hierarchy.leaves_under(node))
    return frozenset((node,))


def _pseudo(name: str, value: object) -> Term:
    """A demographic value or an age block as a term of its own (no code starts with @)."""
    return frozenset((f"{PSEUDO}{name}={value}",))


def _add(out: TermCounts, term: Term, count: int) -> None:
    if count > 0:
        out[term] = out.get(term, 0) + int(count)


# --------------------------------------------------------------------------- readers
def _parquet(files: Mapping[str, bytes], name: str, columns: list[str] | None = None,
             dictionary: Iterable[str] = ()):  # noqa: ANN202 - a pyarrow Table
    import pyarrow.parquet as pq

    if name not in files:
        raise Unreadable(f"the release has no {name}")
    try:
        return pq.read_table(io.BytesIO(files[name]), columns=columns,
                             read_dictionary=list(dictionary))
    except Exception:  # noqa: BLE001 - pyarrow's messages could quote the bytes
        raise Unreadable(f"{name} is not a readable Parquet table") from None


def _dictionary_counts(column) -> dict[str, int]:  # noqa: ANN001 - a pyarrow ChunkedArray
    """Non-null values of a text column and how many rows show each (counted by Arrow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise Unreadable("a code column is not text")
    counted = pc.value_counts(column)
    values = counted.field("values")
    if pa.types.is_dictionary(values.type):
        values = values.cast(kind)
    return {v: n for v, n in zip(values.to_pylist(), counted.field("counts").to_pylist(),
                                 strict=True) if v is not None}


def _disassociation(files: Mapping[str, bytes], h: Hierarchy) -> TermCounts:
    """Every row with a code is one record holding it (record and shared chunks), or one
    item chunk listing it (held by 1 … k−1 records there: counted once, a lower bound)."""
    table = _parquet(files, dis_format.RELEASE_FILE, ["code"], ["code"])
    out = TermCounts()
    for code, n in _dictionary_counts(table["code"]).items():
        _add(out, _leaves(h, code), n)
    return out


def _list_rows(column) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001 - pyarrow column
    """Row index and value of every element of a list column (nulls refused)."""
    import pyarrow as pa

    array = column.combine_chunks()
    if not pa.types.is_list(array.type) or array.null_count:
        raise Unreadable("a list column holds something else")
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    values = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    rows = np.repeat(np.arange(len(array)), np.diff(offsets))
    return rows, values


def _kkm(files: Mapping[str, bytes], h: Hierarchy) -> TermCounts:
    """Each record's generalized codes (a code set: any non-empty subset of its leaves) and
    each generalized demographic, counted once per record. Suppressed codes are not
    published (issue 14), so no term stands for them: a code suppressed in one release and
    shown in the other reads as a change of count."""
    import pyarrow as pa

    codes = _parquet(files, kkm_format.CODES_FILE)
    records = _parquet(files, kkm_format.RECORDS_FILE)
    if {"id", "codes"} - set(codes.column_names) or \
            kkm_format.IDS_COLUMN not in records.column_names:
        raise Unreadable("a (k, k^m) release lacks its code ids or code lists")
    ids = codes.column("id").to_numpy()
    if not np.array_equal(ids, np.arange(codes.num_rows)):
        raise Unreadable("code table ids are not 0, 1, … in row order")
    entry_rows, entry_values = _list_rows(codes.column("codes"))
    if not pa.types.is_string(entry_values.type):
        raise Unreadable("a generalized code is not a list of codes")
    members: list[list[str]] = [[] for _ in range(codes.num_rows)]
    for row, code in zip(entry_rows.tolist(), entry_values.to_pylist(), strict=True):
        members[row].append(code)
    # one term index per distinct leaf set (two entries may cover the same leaves)
    term_of: dict[Term, int] = {}
    entry_term = np.array([term_of.setdefault(frozenset().union(*(_leaves(h, c) for c in m)),
                                              len(term_of)) for m in members],
                          dtype=np.int64).reshape(codes.num_rows)
    rows, values = _list_rows(records.column(kkm_format.IDS_COLUMN))
    shown = values.to_numpy(zero_copy_only=False).astype(np.int64)
    if len(shown) and (shown.min() < 0 or shown.max() >= codes.num_rows):
        raise Unreadable("a record refers to an id the code table does not hold")
    terms = entry_term[shown]
    strictly_ascending = not ((np.diff(shown) <= 0) & (np.diff(rows) == 0)).any()
    if not (strictly_ascending and len(term_of) == codes.num_rows):
        # a record shows an id twice, or two ids covering the same leaves: once each
        terms = np.unique(rows * max(len(term_of), 1) + terms) % max(len(term_of), 1)
    counts = np.bincount(terms, minlength=len(term_of))
    out = TermCounts()
    for term, index in term_of.items():
        _add(out, term, counts[index])
    for name in records.column_names:
        if name in ("cluster", kkm_format.IDS_COLUMN):
            continue
        for value, n in _values(records.column(name)).items():
            _add(out, _pseudo(name, value), n)
    return out


def _values(column) -> Counter[str]:  # noqa: ANN001 - a pyarrow ChunkedArray
    """A demographic column's values (``[low, high]`` as text) and their rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_list(column.type):
        rows, values = _list_rows(column)
        flat = values.to_numpy(zero_copy_only=False)
        width = np.bincount(rows, minlength=len(column)) if len(rows) else np.zeros(0, int)
        if len(width) and (width == width[0]).all() and width[0] == 2:
            lows, highs = flat[0::2].astype(float), flat[1::2].astype(float)
            keys, counts = np.unique(np.column_stack([lows, highs]), axis=0,
                                     return_counts=True)
            return Counter({f"[{lo!r}, {hi!r}]": int(n)
                            for (lo, hi), n in zip(keys.tolist(), counts.tolist(),
                                                   strict=True)})
        return Counter(orjson.dumps(v).decode() for v in column.to_pylist())
    counted = pc.value_counts(column.combine_chunks())
    return Counter({orjson.dumps(v).decode(): int(n) for v, n in
                    zip(counted.field("values").to_pylist(),
                        counted.field("counts").to_pylist(), strict=True)})


@contextmanager
def _paused_gc() -> Iterator[None]:
    """Millions of acyclic lists and dicts built in bulk: without the pause the cyclic
    collector walks them again and again (16 s instead of 0.5 s for 100,000 trajectories)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _json_lines(files: Mapping[str, bytes], name: str) -> list[object]:
    if name not in files:
        raise Unreadable(f"the release has no {name}")
    try:
        with _paused_gc():
            return list(map(orjson.loads, filter(bytes.strip, files[name].split(b"\n"))))
    except orjson.JSONDecodeError:
        raise Unreadable(f"{name} is not JSON Lines") from None


def _gccens(files: Mapping[str, bytes], h: Hierarchy) -> TermCounts:
    """Each line's codes left after censoring, counted once per line (a count ≥ 1). The
    multiplicities are not terms: a group whose lines held a code's instances drops that
    code's line count too, so the code is attributed either way; how often the group holds
    it does not change which group is below k."""
    lines = _json_lines(files, gccens_format.RECORDS_FILE)
    maps = [line.get("codes") if isinstance(line, dict) else None for line in lines]
    if not all(isinstance(m, dict) for m in maps):
        raise Unreadable("a line has no map of codes")
    out = TermCounts()
    for code, n in Counter(chain.from_iterable(maps)).items():  # type: ignore[arg-type]
        _add(out, _leaves(h, code), n)
    return out


def _lda(files: Mapping[str, bytes], h: Hierarchy) -> TermCounts:
    """Each line's ICD nodes and age blocks, each counted once per line."""
    with _paused_gc():
        return _lda_terms(_json_lines(files, lda_format.RECORDS_FILE), h)


def _lda_terms(lines: list[object], h: Hierarchy) -> TermCounts:
    nodes: Counter[str] = Counter()
    blocks: Counter[tuple[object, object]] = Counter()
    for line in lines:
        trajectory = line.get("trajectory") if isinstance(line, dict) else None
        if not isinstance(trajectory, list):
            raise Unreadable("a line has no trajectory")
        try:
            nodes.update({str(node) for node, _ in trajectory})
            blocks.update({(a, b) for _, (a, b) in trajectory})
        except (TypeError, ValueError):
            raise Unreadable("a trajectory pair is not (node, [first, last])") from None
    out = TermCounts()
    for node, n in nodes.items():
        _add(out, _leaves(h, node), n)
    for (a, b), n in blocks.items():
        _add(out, _pseudo("age", f"[{a}, {b}]"), n)
    return out


_READERS: dict[str, Callable[[Mapping[str, bytes], Hierarchy], TermCounts]] = {
    "disassociation": _disassociation, "kkm": _kkm, "gccens": _gccens, "lda": _lda}


def family(algorithm: str) -> str:
    """The release format of a registry name; ValueError for one this audit cannot read."""
    name = algorithm.replace("_", "-")
    if name not in FAMILIES:
        raise ValueError(f"the history audit reads no {algorithm} release (it reads "
                         f"{', '.join(sorted(FAMILIES))})")
    return FAMILIES[name]


def published_terms(release: HeldRelease, hierarchy: Hierarchy | None = None) -> TermCounts:
    """Every published term of ``release`` (its leaf codes) → occurrences, one per record
    showing it (see the module docstring). Raises :class:`Unreadable` (no value quoted)
    when the bytes are not the family's format, ValueError for an unknown algorithm."""
    reader = _READERS[family(release.algorithm)]
    return reader(release.files, hierarchy or icd9_hierarchy())


# --------------------------------------------------------------------------- the attack
def attributed(more: Mapping[Term, int], fewer: Mapping[Term, int]) -> int:
    """How many terms of ``more`` a group present only there is caught holding: those shown
    more often than in ``fewer`` (absent there: 0, as every term covering a vanished leaf
    code is)."""
    get = fewer.get
    return sum(1 for term, n in more.items() if n > get(term, 0))


@dataclass(frozen=True)
class _Finding:
    """Terms attributed to one side of one pair: how many, to how many patients."""

    label: str
    side: str        # "removed" (earlier only) or "added" (current only)
    group: int
    terms: int
    k: int


def _pair(current: Mapping[Term, int], earlier: Mapping[Term, int], label: str,
          overlap: Overlap, k: int) -> list[_Finding]:
    found = []
    if overlap.only_earlier and (n := attributed(earlier, current)):
        found.append(_Finding(label, "removed", overlap.only_earlier, n, k))
    if overlap.only_current and (n := attributed(current, earlier)):
        found.append(_Finding(label, "added", overlap.only_current, n, k))
    return found


def attack_history(current: HeldRelease, earlier: Sequence[tuple[HeldRelease, Overlap]], *,
                   terms: MutableMapping[str, Mapping[Term, int]] | None = None,
                   hierarchy: Hierarchy | None = None) -> AttackReport:
    """Difference ``current`` with every earlier release of the same patients.

    ``terms`` caches :func:`published_terms` by run label: entries found there are used as
    they are, the others are computed and stored, so a caller that keeps the mapping reads
    each release once however often it is compared. A release that cannot be read fails
    the audit (the attacker may read it better than this code).
    """
    started = time.perf_counter()
    cache: MutableMapping[str, Mapping[Term, int]] = terms if terms is not None else {}
    threshold = max([current.k, *(e.k for e, _ in earlier)])

    def read(release: HeldRelease) -> Mapping[Term, int]:
        if release.label not in cache:
            cache[release.label] = published_terms(release, hierarchy)
        return cache[release.label]

    findings: list[_Finding] = []
    identical = 0
    try:
        now = read(current)
        for release, overlap in earlier:
            if not isinstance(overlap, Overlap):
                raise TypeError("each earlier release needs its Overlap")
            if not overlap.only_current and not overlap.only_earlier:
                identical += 1
                continue
            findings += _pair(now, read(release), release.label, overlap,
                              max(current.k, release.k))
    except Unreadable as exc:
        return AttackReport(ATTACKER_MODEL, len(earlier), False, None, threshold, False,
                            measured=f"a release could not be read as published terms: "
                                     f"{exc}", required=REQUIRED,
                            seconds=time.perf_counter() - started)
    return _report(findings, len(earlier), identical, threshold,
                   time.perf_counter() - started)


def _report(findings: list[_Finding], compared: int, identical: int, threshold: int,
            seconds: float) -> AttackReport:
    below = [f for f in findings if f.group < f.k]
    smallest = min((f.group for f in findings), default=None)
    same = f"; {identical:,} with the same patients (nothing to attribute)" if identical else ""
    if below:
        worst = min(below, key=lambda f: (f.group, -f.terms, f.label))
        measured = (f"{len(below):,} of {compared:,} earlier releases give terms away: "
                    f"{sum(f.terms for f in below):,} published terms attributed to groups "
                    f"below k; smallest group {worst.group:,} (the patients {worst.side} "
                    f"since run {worst.label}, {worst.terms:,} terms){same}")
    elif findings:
        measured = (f"compared with {compared:,} earlier releases: "
                    f"{sum(f.terms for f in findings):,} published terms attributed, every "
                    f"one to a group of ≥ k; smallest group {smallest:,}{same}")
    else:
        measured = (f"compared with {compared:,} earlier releases: no published term "
                    f"attributed to anyone{same}")
    return AttackReport(attacker_model=ATTACKER_MODEL, knowledge_sets_tried=compared,
                        exhaustive=True, smallest_candidate_set=smallest,
                        threshold=threshold, passed=not below, measured=measured,
                        required=REQUIRED, seconds=seconds)
