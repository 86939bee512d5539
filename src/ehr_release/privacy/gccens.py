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
from typing import TYPE_CHECKING, Any

from ehr_release.privacy.json_lines import (
    MalformedRelease,
    one_record_each,
    release_lines,
    release_meta,
)
from ehr_release.reports import Requirement, VerificationReport

if TYPE_CHECKING:
    from ehr_release.dataset import Dataset

NAME = "gccens"
RECORDS_FILE = "censored.jsonl"
META_FILE = "censoring.json"
_SHOW = 10  # how many offending patients a requirement's evidence names


def _parse(files: Mapping[str, bytes]) -> tuple[list[tuple[str, dict[str, int]]], dict]:
    records = []
    for no, obj in release_lines(files, RECORDS_FILE, META_FILE, ("patient_id", "codes")):
        pid, codes = obj["patient_id"], obj["codes"]
        if not isinstance(pid, str) or not isinstance(codes, dict):
            raise MalformedRelease(f"line {no}: patient_id must be text and codes an object")
        for code, n in codes.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise MalformedRelease(f"line {no}: count of {code!r} must be an integer ≥ 1")
        records.append((pid, dict(codes)))
    meta = release_meta(files, META_FILE)
    if not isinstance(meta.get("caps"), dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in meta["caps"].values()):
        raise MalformedRelease(f"{META_FILE} must be an object with caps (code → integer)")
    return records, meta


def policy_cap(caps: Mapping[str, int], code: str) -> int | None:
    """The declared cap of ``code``: named in ``caps``, else ``caps['*']``, else none.

    'max' (no entry) caps nothing: capping at the sample's maximum changes no record.
    """
    return caps[code] if code in caps else caps.get("*")


class _Population:
    """dis() by intersecting Python sets of holders, rarest key first."""

    def __init__(self, population: Sequence[Mapping[str, int]], codes: set[str]) -> None:
        self.size = len(population)
        self._by_code: dict[str, list[tuple[int, int]]] = {c: [] for c in codes}
        for i, rec in enumerate(population):
            for code, n in rec.items():
                if code in self._by_code:
                    self._by_code[code].append((i, n))
        self._holders: dict[tuple[str, int], frozenset[int]] = {}
        self._dis: dict[frozenset, int] = {}

    def _holding(self, code: str, n: int) -> frozenset[int]:
        key = (code, n)
        if key not in self._holders:
            self._holders[key] = frozenset(i for i, held in self._by_code.get(code, [])
                                           if held >= n)
        return self._holders[key]

    def dis(self, record: Mapping[str, int]) -> int:
        key = frozenset(record.items())
        if key not in self._dis:
            sets = sorted((self._holding(c, n) for c, n in record.items()), key=len)
            if not sets:
                self._dis[key] = self.size
            else:
                self._dis[key] = len(sets[0].intersection(*sets[1:]))
        return self._dis[key]


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
        records, meta = _parse(files)
    except (MalformedRelease, UnicodeDecodeError) as exc:
        return VerificationReport(NAME, [Requirement(
            "release format", f"{RECORDS_FILE} lines of patient_id + positive code counts",
            str(exc), False)])
    reqs = [Requirement("release format", f"{RECORDS_FILE} lines of patient_id + positive "
                        "code counts", f"{len(records)} records parsed", True)]
    original = dict(zip(sample_ids, sample, strict=True))
    reqs.append(one_record_each(
        "one record per sample patient", f"each of the {len(original)} sample patients once",
        original, [pid for pid, _ in records], _SHOW))

    known = [(pid, rec) for pid, rec in records if pid in original]
    not_sub = [pid for pid, rec in known
               if any(n > original[pid].get(code, 0) for code, n in rec.items())]
    reqs.append(Requirement(
        "censoring only", "every released record is a sub-multiset of the original record",
        f"{len(not_sub)} records add codes or instances", not not_sub,
        {"patients": not_sub[:_SHOW]}))

    over = [pid for pid, rec in known
            if any((cap := policy_cap(caps, c)) is not None and n > cap for c, n in rec.items())]
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

    index = _Population(population, {c for _, rec in records for c in rec})
    dis = {pid: index.dis(rec) for pid, rec in records}
    low = sorted(pid for pid, d in dis.items() if d < k)
    smallest = min(dis.values(), default=len(population))
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
    return VerificationReport(NAME, reqs)


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
