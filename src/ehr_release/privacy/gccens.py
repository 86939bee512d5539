"""Independent check of a GCCens release: k-map against the population, from the bytes.

Nothing here comes from ``ehr_release.algorithms``: the released file is parsed strictly, the
caps are read from the parameters, and distinguishability is recounted with plain set
intersections over the population — a different method from the algorithm's bitset index, so
a bug there cannot hide itself here.

Requirements (spec §"Verifying releases"): every released record has dis ≥ k against the
population, is a sub-multiset of the patient's original record, and respects the caps. The
metadata must state exactly the run's parameters (k and the caps policy as declared): a
release that publishes other caps could be publishing the sample's code list or maxima, which
tell a population holder who is in the sample (issue 14, finding 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from operator import itemgetter, methodcaller
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ehr_release.model.reports import Requirement, VerificationReport
from ehr_release.privacy.closed_world import MapOf, Obj
from ehr_release.privacy.json_columns import all_conform, forget, loads_lines
from ehr_release.privacy.json_lines import (
    MalformedRelease,
    one_record_each,
    release_lines,
    release_meta,
)

if TYPE_CHECKING:
    from ehr_release.model.dataset import Dataset

NAME = "gccens"
RECORDS_FILE = "censored.jsonl"
META_FILE = "censoring.json"
_SHOW = 10  # how many offending patients a requirement's evidence names
_LINE = Obj({"patient_id": "str", "codes": MapOf("int")})
_values = methodcaller("values")
#: Counts and caps above this compare as this: no dataset holds 2^62 diagnoses, so a count
#: that large fails the censoring check whatever its exact value (no cap: no limit).
_HUGE = 2 ** 62


def _parse(files: Mapping[str, bytes]) -> tuple[list[str], list[dict[str, int]], dict]:
    """(patient ids, code counts, metadata): column-wise when every line is plainly in
    shape, else line by line (which names the departure, or accepts what orjson alone
    refuses: the verdict is the per-line reader's either way)."""
    fast = _columns(files)
    if fast is None:
        records = _lines(files)
        fast = [pid for pid, _ in records], [codes for _, codes in records]
    meta = release_meta(files, META_FILE)
    if not isinstance(meta.get("caps"), dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in meta["caps"].values()):
        raise MalformedRelease(f"{META_FILE} must be an object with caps (code → integer)")
    return fast[0], fast[1], meta


def _columns(files: Mapping[str, bytes]) -> tuple[list[str], list[dict[str, int]]] | None:
    if RECORDS_FILE not in files or META_FILE not in files:
        return None
    objects = loads_lines(files[RECORDS_FILE])
    if objects is None or not all_conform(objects, _LINE):
        return None
    codes = list(map(itemgetter("codes"), objects))
    try:
        counts = np.fromiter(chain.from_iterable(map(dict.values, codes)), dtype=np.int64)
    except OverflowError:  # beyond 64 bits: the per-line reader judges it
        return None
    if counts.size and counts.min() < 1:
        return None
    return list(map(itemgetter("patient_id"), objects)), codes


def _lines(files: Mapping[str, bytes]) -> list[tuple[str, dict[str, int]]]:
    records = []
    for no, obj in release_lines(files, RECORDS_FILE, META_FILE, ("patient_id", "codes")):
        pid, codes = obj["patient_id"], obj["codes"]
        if not isinstance(pid, str) or not isinstance(codes, dict):
            raise MalformedRelease(f"line {no}: patient_id must be text and codes an object")
        for n in codes.values():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise MalformedRelease(f"line {no}: every code's count must be an integer ≥ 1")
        records.append((pid, dict(codes)))
    return records


def policy_cap(caps: Mapping[str, int], code: str) -> int | None:
    """The declared cap of ``code``: named in ``caps``, else ``caps['*']``, else none.

    'max' (no entry) caps nothing: capping at the sample's maximum changes no record.
    """
    return caps[code] if code in caps else caps.get("*")


class _Flat:
    """Code → count maps as three columns: the map's row, its code's id, the count."""

    def __init__(self, maps: Sequence[Mapping[str, int]], vocab: pd.Index) -> None:
        lengths = np.fromiter(map(len, maps), dtype=np.int64, count=len(maps))
        self.row = np.repeat(np.arange(len(maps), dtype=np.int64), lengths)
        names = np.fromiter(chain.from_iterable(maps), dtype=object, count=len(self.row))
        self.code = vocab.get_indexer(names) if len(vocab) else np.full(len(names), -1)
        try:
            self.count = np.fromiter(chain.from_iterable(map(_values, maps)),
                                     dtype=np.int64, count=len(self.row))
        except OverflowError:  # a count JSON allows but no dataset holds: compared as _HUGE
            self.count = np.array([min(n, _HUGE) for n in chain.from_iterable(
                map(_values, maps))], dtype=np.int64)


def _rows(row: np.ndarray, token: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct sets of tokens as rows padded with -1, each map's row among them)."""
    order = np.lexsort((token, row))
    row, token = row[order], token[order]
    starts = np.searchsorted(row, np.arange(n))
    width = int(np.bincount(row, minlength=n).max()) if n and len(row) else 0
    table = np.full((n, max(width, 1)), -1, dtype=np.int64)
    table[row, np.arange(len(row)) - starts[row]] = token
    span = int(table.max()) + 2 if table.size else 2
    if span ** table.shape[1] < 2 ** 62:  # each row as one integer: a 1-d sort, faster
        _, first, inverse = np.unique((table + 1) @ span ** np.arange(table.shape[1]),
                                      return_index=True, return_inverse=True)
        return table[first], inverse.reshape(-1)
    distinct, inverse = np.unique(table, axis=0, return_inverse=True)
    return distinct, inverse.reshape(-1)


class _Population:
    """dis() by intersecting NumPy arrays of population profiles, rarest key first.

    Population records are grouped into profiles — their counts of the released codes,
    clipped to the largest released count (a record holding more cannot be told apart by
    any released record) — so each distinct released record is tested once per profile
    holding its rarest code, whatever the population's size.
    """

    def __init__(self, population: Sequence[Mapping[str, int]], vocab: pd.Index,
                 top: np.ndarray) -> None:
        self.size = len(population)
        self.base = int(top.max()) + 1 if len(top) else 1
        flat = _Flat(population, vocab)
        keep = (flat.code >= 0) & (flat.count > 0)
        code = flat.code[keep]
        held = np.minimum(flat.count[keep], top[code])
        radix = np.cumprod(np.concatenate([[1], top[:-1] + 1])) if len(top) else top
        if len(top) and float(np.prod((top + 1).astype(float))) < 2.0 ** 62:
            # few codes: a profile is one mixed-radix integer, order-free (a sum)
            key = np.zeros(self.size, dtype=np.int64)
            np.add.at(key, flat.row[keep], held * radix[code])
            distinct, of = np.unique(key, return_inverse=True)
            n_profiles = len(distinct)
            prof, code = np.nonzero(distinct[:, None] // radix % (top + 1))
            held = distinct[prof] // radix[code] % (top[code] + 1)
        else:
            profiles, of = _rows(flat.row[keep], code * self.base + held, self.size)
            n_profiles = len(profiles)
            prof, pos = np.nonzero(profiles >= 0)
            code, held = profiles[prof, pos] // self.base, profiles[prof, pos] % self.base
        self.weight = np.bincount(of.reshape(-1), minlength=n_profiles)
        by_code = np.lexsort((prof, code))
        prof, code, held = prof[by_code], code[by_code], held[by_code]
        bounds = np.searchsorted(code, np.arange(len(vocab) + 1))
        self._holders = [(prof[a:b], held[a:b])
                         for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def dis(self, tokens: np.ndarray) -> int:
        """Population records containing the released record given as its tokens."""
        items = sorted(((int(t) // self.base, int(t) % self.base) for t in tokens if t >= 0),
                       key=lambda item: len(self._holders[item[0]][0]))
        cand: np.ndarray | None = None
        for code, n in items:
            ids, counts = self._holders[code]
            ok = ids[counts >= n]
            cand = ok if cand is None else np.intersect1d(cand, ok, assume_unique=True)
            if not len(cand):
                return 0
        return self.size if cand is None else int(self.weight[cand].sum())




def _lines_with(pids: Sequence[str], rows: np.ndarray) -> list[str]:
    """The ids of the lines ``rows`` names, in line order, each line once."""
    return [pids[i] for i in np.unique(rows).tolist()]


def _censoring_only(pids: Sequence[str], released: _Flat, own: np.ndarray,
                    known: np.ndarray, sample: Sequence[Mapping[str, int]],
                    vocab: pd.Index) -> Requirement:
    """Every released count at most the patient's original count of the code."""
    held = _Flat(sample, vocab)
    mine = held.code >= 0
    width = max(len(vocab), 1)
    keys = held.row[mine] * width + held.code[mine]
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], held.count[mine][order]
    want = own[released.row] * width + released.code
    at = np.clip(np.searchsorted(keys, want), 0, max(len(keys) - 1, 0))
    found = (at < len(keys)) & (keys[at] == want) if len(keys) else np.zeros(len(want), bool)
    orig = np.where(found, counts[at] if len(keys) else 0, 0)
    not_sub = _lines_with(pids, released.row[known & (released.count > orig)])
    return Requirement(
        "censoring only", "every released record is a sub-multiset of the original record",
        f"{len(not_sub)} records add codes or instances", not not_sub,
        {"patients": not_sub[:_SHOW]})


def check_kmap(files: Mapping[str, bytes], sample_ids: Sequence[str],
                sample: Sequence[Mapping[str, int]], population: Sequence[Mapping[str, int]],
                k: int, caps: Mapping[str, int],
                population_info: Mapping[str, Any] | None = None) -> VerificationReport:
    """Re-verify a GCCens release.

    Parameters
    ----------
    files
        The release files (``censored.jsonl``, ``censoring.json``; their exact shape is the
        closed-world schema's business, :mod:`ehr_release.privacy.formats.gccens`).
    sample_ids, sample
        The original sample: patient ids and their code multisets.
    population
        The population's code multisets.
    k, caps
        The run's parameters (``caps`` as given, ``"*"`` for unlisted codes).
    population_info
        Fingerprint and size of the population at hand, compared with the release's record.

    Returns
    -------
    VerificationReport
        Holds only if every requirement passed; a malformed release fails its format check.
    """
    try:
        pids, maps, meta = _parse(files)
        forget()  # the closed world's parse, kept for this reader: read now
    except (MalformedRelease, UnicodeDecodeError) as exc:
        return VerificationReport(NAME, [Requirement(
            "release format", f"{RECORDS_FILE} lines of patient_id + positive code counts",
            str(exc), False)])
    reqs = [Requirement("release format", f"{RECORDS_FILE} lines of patient_id + positive "
                        "code counts", f"{len(pids)} records parsed", True)]
    # each sample patient's row (the last row of a repeated id)
    row_of = dict(zip(sample_ids, range(len(sample)), strict=True))
    reqs.append(one_record_each(
        "one record per sample patient", f"each of the {len(row_of)} sample patients once",
        row_of, pids, _SHOW))

    vocab = pd.Index(pd.unique(np.fromiter(chain.from_iterable(maps), dtype=object)))
    released = _Flat(maps, vocab)
    own = np.fromiter(map(row_of.get, pids, repeat(-1)), dtype=np.int64, count=len(pids))
    known = own[released.row] >= 0
    reqs.append(_censoring_only(pids, released, own, known, sample, vocab))

    cap = np.array([_HUGE if (c := policy_cap(caps, code)) is None else min(c, _HUGE)
                    for code in vocab], dtype=np.int64)
    over = _lines_with(pids, released.row[known & (released.count > cap[released.code])])
    reqs.append(Requirement(
        "caps respected", "no code above its declared cap", f"{len(over)} records exceed a cap",
        not over, {"patients": over[:_SHOW], "caps": dict(caps)}))
    published = {"k": meta.get("k"), "caps": meta["caps"]}
    declared = {"k": k, "caps": dict(caps)}
    reqs.append(Requirement(
        "parameters only", "the metadata states the run's k and caps policy as declared, "
        "nothing derived from the sample", "as declared" if published == declared else
        "the published k or caps differ from the run's parameters", published == declared,
        {"declared": declared}))  # what a leaky release published is not echoed

    top = np.zeros(len(vocab), dtype=np.int64)
    np.maximum.at(top, released.code, released.count)
    index = _Population(population, vocab, top)
    shapes, of_line = _rows(released.row, released.code * index.base + released.count,
                            len(pids))
    dis = np.array([index.dis(row) for row in shapes], dtype=np.int64)[of_line]
    if len(set(pids)) == len(pids):
        low = sorted(pids[i] for i in np.flatnonzero(dis < k).tolist())
        smallest = int(dis.min()) if len(dis) else len(population)
    else:  # a repeated id (already failed above) counts once, by its last line
        by_id = dict(zip(pids, dis.tolist(), strict=True))
        low = sorted(pid for pid, d in by_id.items() if d < k)
        smallest = min(by_id.values(), default=len(population))
    reqs.append(Requirement(
        "k-map", f"every released record is contained in ≥ {k} population records",
        f"smallest distinguishability {smallest}; {len(low)} records below {k}",
        not low and len(population) >= k, {"patients": low[:_SHOW],
                                           "population_size": len(population)}))
    if population_info is not None:
        claimed = meta.get("population", {})
        same = all(claimed.get(key) == value for key, value in population_info.items())
        reqs.append(Requirement(
            "population", "the release was mapped against the population verified here",
            f"{population_info.get('records')} records, fingerprint "
            f"{str(population_info.get('fingerprint'))[:12]}…", same,
            {"release": claimed, "verified": dict(population_info)}))
    reqs.append(_line_order(pids))
    reqs.append(_replayed(pids, maps, own, sample, population, k, caps))
    return VerificationReport(NAME, reqs)


def _line_order(pids: Sequence[str]) -> Requirement:
    """Lines sorted by patient_id (a keyed pseudonym, the site's verifier checks it is the
    patient's own): the documented order, so line order can carry nothing chosen."""
    moved = sum(a >= b for a, b in zip(pids, pids[1:], strict=False))
    return Requirement(
        "line order", "lines sorted by patient_id, the documented order (exact check; "
        "needs no key)", "in the documented order" if not moved else
        f"{moved} of {max(len(pids) - 1, 0)} neighbouring lines out of order", not moved)


def _replayed(pids: Sequence[str], maps: Sequence[Mapping[str, int]], own: np.ndarray,
              sample: Sequence[Mapping[str, int]], population: Sequence[Mapping[str, int]],
              k: int, caps: Mapping[str, int]) -> Requirement:
    """Each released record exactly what GCCens' deterministic censoring leaves (replayed
    independently, :mod:`ehr_release.privacy.gccens_replay`): no instance censored beyond or
    short of it, so which instances go is no free choice."""
    from ehr_release.privacy.gccens_replay import replay_censoring

    codes = {c for r in sample for c in r}
    expected = replay_censoring(sample, population, k, {c: policy_cap(caps, c) for c in codes})
    differ = [pids[i] for i, row in enumerate(own.tolist())
              if row < 0 or dict(maps[i]) != expected[row]]
    return Requirement(
        "censoring replayed", "every record exactly as GCCens' documented censoring leaves it "
        "(exact replay from the sample and population; ties to the lowest code)",
        f"{len(pids) - len(differ)} of {len(pids)} records as replayed", not differ,
        {"patients": differ[:_SHOW]})


def verify(files: Mapping[str, bytes], original: Dataset,
           params: Mapping[str, Any]) -> VerificationReport:
    """The entry point every family shares: k-map of ``files`` against the population named
    by ``params['population']`` (as the release's plan read it), for the run's k and caps."""
    from ehr_release.configuration.caps import parse_caps
    from ehr_release.ingest.population import population_of

    population = population_of(params)
    return check_kmap(files, original.patient_ids, original.code_multisets(),
                      population.multisets, int(params["k"]),
                      parse_caps(str(params.get("caps", "max"))),
                      population_info=population.info)
