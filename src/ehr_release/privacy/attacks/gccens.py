"""k-map's adversary against a GCCens release, from the published bytes and the population.

The adversary holds the identified population and every target's full record in it (codes
with multiplicities). For every released line they list the population records it could be:
those containing the line's codes (multiset containment). k-map assumes they do not know who
is in the sample, so the published bytes must not tell them; everything published is used:

* per-line fields beyond ``codes`` (a code → count map read as lower bounds on the record, an
  integer read as the record's number of instances or of distinct codes — whichever holds for
  the sample: an attacker who knows what the field means);
* metadata naming codes (a code list, per-code counts) other than the declared caps policy:
  read as "someone in the sample holds this code at least this often" where that is true.
  A code held by one population record makes that record a known sample member, who must
  then be on a line consistent with them — and unit propagation carries that through;
* the line order, when it is neither by ``patient_id`` (a random pseudonym) nor by content:
  read as the extract's order aligned with the population's, so line i's record must come
  after line i−1's and before line i+1's in the population table.

The candidate set of a sample patient is that of their line; the audit fails when one is
below k. Exhaustive: every population record is tested against every distinct released line.
Cross-record matching (Hall's condition: k lines whose only candidates are the same k records
use them up, and a third line loses them) is a deduction from the records themselves that the
k-map model does not cover; it is computed and reported, but does not fail the audit.

Independent of the algorithm and of the verifier (imports neither): population records are
grouped into profiles (codes of the release, counts clipped to the largest released count)
and a line's candidates are the profiles containing it, found by intersecting sorted arrays.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd

from ehr_release.model.hierarchy import normalize_icd9
from ehr_release.model.reports import AttackReport, candidate_set_distribution

if TYPE_CHECKING:
    from ehr_release.model.dataset import Dataset

RECORDS_FILE = "censored.jsonl"
META_FILE = "censoring.json"
ATTACKER_MODEL = ("an attacker holding the population and each target's full record in it, "
                  "reading every published field")
#: A hint whose holders exceed this many records is not worth following (it rules out
#: nothing a line's own candidates do not).
_HINT_HOLDERS = 50_000
_META_SCALARS = {"k", "records", "fingerprint"}
_canonical = partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)

Record = Mapping[str, int]


# ---------------------------------------------------------------- reading the bytes
class Unreadable(ValueError):
    """The release cannot be read as lines of codes; the attack cannot vouch for it."""


def _lines(files: Mapping[str, bytes]) -> list[tuple[str, dict[str, int], dict[str, Any]]]:
    """(patient_id, codes, every other field) per non-blank line."""
    if RECORDS_FILE not in files:
        raise Unreadable(f"no {RECORDS_FILE}")
    plain = _plain_lines(files[RECORDS_FILE])
    return plain if plain is not None else _each_line(
        files[RECORDS_FILE].decode("utf-8", errors="replace"))


def _plain_lines(data: bytes) -> list[tuple[str, dict[str, int], dict[str, Any]]] | None:
    """The lines parsed by orjson in one C-level pass, when each is exactly a text id and
    a map of positive integer counts (what a correct release holds); None otherwise, and
    :func:`_each_line` reads them one by one."""
    try:
        objs = list(map(orjson.loads, filter(bytes.strip, data.split(b"\n"))))
    except orjson.JSONDecodeError:
        return None
    if objs and (set(map(type, objs)) != {dict} or set(map(len, objs)) != {2}):
        return None
    try:
        pids = list(map(itemgetter("patient_id"), objs))
        codes = list(map(itemgetter("codes"), objs))
    except KeyError:
        return None
    if objs and (set(map(type, pids)) != {str} or set(map(type, codes)) != {dict}):
        return None
    values = list(chain.from_iterable(map(dict.values, codes)))
    if values and (set(map(type, values)) != {int} or min(values) < 1):
        return None
    return list(zip(pids, codes, repeat({}), strict=False))


def _each_line(text: str) -> list[tuple[str, dict[str, int], dict[str, Any]]]:
    out = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise Unreadable("a line is not JSON") from None
        codes = obj.get("codes") if isinstance(obj, dict) else None
        if not isinstance(codes, dict) or not all(type(n) is int and n >= 0
                                                  for n in codes.values()):
            raise Unreadable("a line has no code counts")
        extra = {key: v for key, v in obj.items() if key not in ("patient_id", "codes")}
        out.append((str(obj.get("patient_id")), {str(c): n for c, n in codes.items() if n},
                    extra))
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def declared_caps(text: str) -> dict[str, int]:
    """The caps parameter as the owner wrote it ('max', 'N' or CODE:CAP,…), read again."""
    text = str(text).strip()
    if text in ("", "max"):
        return {}
    if re.fullmatch(r"\d+", text):
        return {"*": int(text)}
    out = {}
    for item in text.split(","):
        code, _, cap = item.partition(":")
        code = code.strip()
        out[code if code == "*" else normalize_icd9(code)] = int(cap)
    return out


def _meta_hints(meta: Any, policy: Mapping[str, int]) -> Iterator[tuple[str, int]]:
    """(code, count) pairs the metadata names outside the declared policy."""
    stack = [(None, meta)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            if key == "caps" and value == dict(policy):
                continue  # the declared policy: a parameter, known to all
            for sub_key, sub in value.items():
                if _count(sub) and sub_key not in _META_SCALARS:
                    yield str(sub_key), sub
                else:
                    stack.append((sub_key, sub))
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    yield item, 1
                else:
                    stack.append((key, item))


# ---------------------------------------------------------------- the population
def population_records(params: Mapping[str, Any]) -> Sequence[Record]:
    """The population's code multisets: as the release's plan read them once (a large
    population takes seconds to read), else read now from ``params['population']``."""
    from ehr_release.ingest.population import population_of

    return population_of(params).multisets


class _Profiles:
    """Population records grouped by their codes among ``top``, counts clipped to ``top``."""

    def __init__(self, population: Sequence[Record], top: Mapping[str, int]) -> None:
        ids: dict[tuple[tuple[str, int], ...], int] = {}

        class Seen(dict):
            """A record's items as stored → its profile: most records repeat a few shapes."""

            def __missing__(self, raw: tuple) -> int:
                key = tuple(sorted((c, min(n, top[c])) for c, n in raw if c in top and n))
                found = self[raw] = ids.setdefault(key, len(ids))
                return found

        seen = Seen()
        of = np.fromiter(map(seen.__getitem__, map(tuple, map(dict.items, population))),
                         dtype=np.int64, count=len(population))
        self.of = of
        self.weight = np.bincount(of, minlength=len(ids))
        self._members: list[np.ndarray] | None = None
        rows: dict[str, list[tuple[int, int]]] = {c: [] for c in top}
        for key, pid in ids.items():
            for code, n in key:
                rows[code].append((pid, n))
        self._by_code = {c: (np.array([p for p, _ in r], dtype=np.int64),
                             np.array([n for _, n in r], dtype=np.int64))
                         for c, r in rows.items()}
        self.n = len(ids)

    def containing(self, record: Record) -> np.ndarray:
        """Sorted ids of the profiles holding ``record`` (every code at least that often)."""
        items = sorted(record.items(), key=lambda it: len(self._by_code[it[0]][0]))
        if not items:
            return np.arange(self.n)
        cand: np.ndarray | None = None
        for code, n in items:
            ids, counts = self._by_code[code]
            ok = ids[counts >= n]
            cand = ok if cand is None else np.intersect1d(cand, ok, assume_unique=True)
            if not len(cand):
                break
        assert cand is not None
        return cand

    def members(self, profiles: np.ndarray) -> np.ndarray:
        """Sorted population positions of the records in ``profiles``."""
        if self._members is None:
            order = np.argsort(self.of, kind="stable")
            self._members = np.split(order, np.cumsum(self.weight)[:-1])
        if not len(profiles):
            return np.empty(0, dtype=np.int64)
        return np.sort(np.concatenate([self._members[p] for p in profiles]))


# ---------------------------------------------------------------- the attack
def attack(files: Mapping[str, bytes], original: Dataset, params: dict[str, Any]) -> AttackReport:
    """The entry point: the population named by ``params['population']``."""
    return attack_kmap(files, original.patient_ids, original.code_multisets(),
                       population_records(params), int(params["k"]),
                       declared_caps(params.get("caps", "max")))


def attack_kmap(files: Mapping[str, bytes], sample_ids: Sequence[str],
                sample: Sequence[Record], population: Sequence[Record], k: int,
                caps: Mapping[str, int]) -> AttackReport:
    """Smallest candidate set of any sample patient, using every published field.

    ``sample_ids`` are the ids the release uses (its pseudonyms); ``caps`` the declared
    policy (code or '*' → cap; empty for 'max').
    """
    try:
        lines = _lines(files)
        meta = json.loads(files[META_FILE]) if META_FILE in files else {}
    except (Unreadable, json.JSONDecodeError, UnicodeDecodeError) as exc:
        why = str(exc) if isinstance(exc, Unreadable) else type(exc).__name__  # no values
        return _report(len(population), k, None, f"release unreadable ({why})")
    if not lines:
        return _report(len(population), k, len(population), "no released line")
    if any(map(itemgetter(2), lines)):
        truth = {pid: Counter(rec) for pid, rec in zip(sample_ids, sample, strict=True)}
        known = [_known(codes, extra, truth.get(pid)) for pid, codes, extra in lines]
    else:  # nothing beyond the codes: a line tells its codes, no other fact
        known = list(zip(map(itemgetter(1), lines), repeat([]), strict=False))
    needs = list(map(itemgetter(0), known))
    # lines telling the same thing share their candidates: grouped by their canonical bytes
    try:
        keys = np.fromiter(map(_canonical, needs), dtype=object, count=len(needs))
    except orjson.JSONEncodeError:  # a count beyond 64 bits, read by the per-line reader
        keys = np.array([json.dumps(sorted(need.items())) for need in needs], dtype=object)
    group_of, _ = pd.factorize(keys)
    first = np.unique(group_of, return_index=True)[1].tolist()
    top: dict[str, int] = {}
    for i in first:
        for code, n in needs[i].items():
            top[code] = max(top.get(code, 0), n)
    profiles = _Profiles(population, top)
    found = [profiles.containing(needs[i]) for i in first]
    size = np.array([int(profiles.weight[c].sum()) for c in found], dtype=np.int64)[group_of]
    cand_profiles: list[np.ndarray] = list(map(found.__getitem__, group_of.tolist()))
    hints = _true_hints(_meta_hints(meta, caps), sample)
    order_leaks = _order_leaks(lines)
    narrowed = _narrow(known, cand_profiles, size, profiles, population, hints, order_leaks,
                       len(lines), k)
    smallest = int(narrowed.min())
    cross = min(_hall(found, np.bincount(group_of), profiles.weight), smallest)
    notes = []
    if hints:
        notes.append(f"metadata revealed {len(hints)} code count(s) of the sample")
    if order_leaks:
        notes.append("line order followed the extract")
    if any(map(itemgetter(1), known)):
        notes.append("per-line fields beyond the codes were used")
    note = f" ({'; '.join(notes)})" if notes else ""
    measured = (f"smallest candidate set {smallest:,} over {len(population):,} population "
                f"records × {len(lines):,} released lines{note}; cross-record matching, which "
                f"k-map does not model, narrows the smallest to {cross:,}")
    return replace(_report(len(population), k, smallest, measured),
                   candidate_set_sizes=candidate_set_distribution(narrowed))


def _report(n: int, k: int, smallest: int | None, measured: str) -> AttackReport:
    return AttackReport(attacker_model=ATTACKER_MODEL, knowledge_sets_tried=n, exhaustive=True,
                        smallest_candidate_set=smallest, threshold=k,
                        passed=smallest is not None and smallest >= k, measured=measured,
                        required=f"k-map adversary ({ATTACKER_MODEL}): every released line "
                                 f"is one of ≥ {k} population records")


def _known(codes: dict[str, int], extra: Mapping[str, Any],
           truth: Counter | None) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """What a line tells about its population record: code lower bounds, scalar facts.

    An extra field is used under the reading that is true for the patient (the audit plays
    an attacker who knows what the field means); one true under no reading is ignored.
    """
    need = dict(codes)
    facts: list[tuple[str, int]] = []
    for value in extra.values():
        if isinstance(value, dict) and all(_count(n) for n in value.values()):
            if truth is not None and all(truth.get(c, 0) >= n for c, n in value.items()):
                for code, n in value.items():
                    if n:
                        need[str(code)] = max(need.get(str(code), 0), n)
        elif _count(value) and truth is not None:
            for name, measure in (("instances", sum(truth.values())), ("distinct", len(truth))):
                if measure == value:
                    facts.append((name, value))
                    break
    return need, facts


def _true_hints(named: Iterator[tuple[str, int]], sample: Sequence[Record]) -> list[tuple]:
    """The (code, count) pairs that are true of some sample record (the rest mislead)."""
    named = list(named)
    if not named:
        return []
    most: dict[str, int] = {}
    for rec in sample:
        for code, n in rec.items():
            most[code] = max(most.get(code, 0), n)
    return sorted({(code, max(n, 1)) for code, n in named if most.get(code, 0) >= max(n, 1)})


def _order_leaks(lines: Sequence[tuple[str, dict[str, int], dict]]) -> bool:
    """True unless the lines are ordered by pseudonym or by their published content."""
    ids = [pid for pid, _, _ in lines]
    if ids == sorted(ids):
        return False
    content = [json.dumps(sorted(codes.items())) for _, codes, _ in lines]
    return content != sorted(content)


def _narrow(known, cand_profiles, size, profiles, population, hints, order_leaks,
            n_lines: int, k: int) -> np.ndarray:
    """Candidate-set sizes after the deductions the published fields allow."""
    facts = [f for _, f in known]
    if not (hints or order_leaks or any(facts)):
        return size
    small = {i for i in range(n_lines) if order_leaks or facts[i] or size[i] <= n_lines + k}
    sets: dict[int, set[int]] = {}
    stats = _record_stats(population) if any(facts) else None
    ordered: list[np.ndarray] = []
    for i in sorted(small):
        members = profiles.members(cand_profiles[i])
        if facts[i] and stats is not None:
            for name, value in facts[i]:
                members = members[stats[name][members] >= value]
        ordered.append(members)
        sets[i] = set(members.tolist())
    if order_leaks:
        _monotone(ordered, sets)
    forced = _hinted(hints, population, profiles, cand_profiles, sets, n_lines)
    removed = _propagate(sets, forced, cand_profiles, profiles)
    out = size.astype(np.int64) - removed
    for i, s in sets.items():
        out[i] = len(s)
    return out


def _record_stats(population: Sequence[Record]) -> dict[str, np.ndarray]:
    return {"instances": np.array([sum(r.values()) for r in population], dtype=np.int64),
            "distinct": np.array([sum(1 for n in r.values() if n) for r in population],
                                 dtype=np.int64)}


def _monotone(ordered: list[np.ndarray], sets: dict[int, set[int]]) -> None:
    """Keep the candidates that fit a strictly increasing assignment of lines to records."""
    if any(not len(c) for c in ordered):
        return
    low, last = [], -1
    for c in ordered:
        pos = int(np.searchsorted(c, last, side="right"))
        if pos == len(c):
            return  # no increasing assignment: the order does not follow the population's
        last = int(c[pos])
        low.append(last)
    high, nxt = [0] * len(ordered), np.iinfo(np.int64).max
    for j in range(len(ordered) - 1, -1, -1):
        c = ordered[j]
        pos = int(np.searchsorted(c, nxt, side="left")) - 1
        if pos < 0:
            return
        nxt = int(c[pos])
        high[j] = nxt
    for j, i in enumerate(sorted(sets)):
        lo = low[j - 1] if j else -1
        hi = high[j + 1] if j + 1 < len(ordered) else np.iinfo(np.int64).max
        sets[i] = {x for x in sets[i] if lo < x < hi}


def _hinted(hints, population, profiles, cand_profiles, sets, n_lines: int) -> set[int]:
    """Sample members the metadata names outright; narrow lines that alone can host a hint."""
    forced: set[int] = set()
    codes = {c for c, _ in hints}
    if not codes:
        return forced
    held: dict[str, list[tuple[int, int]]] = {c: [] for c in codes}
    for i, rec in enumerate(population):
        for code in codes.intersection(rec):
            held[code].append((i, rec[code]))
    for code, need in hints:
        holders = np.array([i for i, n in held[code] if n >= need], dtype=np.int64)
        if not len(holders) or len(holders) > _HINT_HOLDERS:
            continue
        if len(holders) == 1:
            forced.add(int(holders[0]))
        their, held_by = np.unique(profiles.of[holders]), set(holders.tolist())
        hosts = [i for i in range(n_lines) if (
            not sets[i].isdisjoint(held_by) if i in sets
            else bool(np.isin(cand_profiles[i], their).any()))]
        if len(hosts) == 1:  # the one line a holder can be on: it is a holder's
            i = hosts[0]
            if i not in sets:
                sets[i] = set(profiles.members(cand_profiles[i]).tolist())
            sets[i] &= held_by
    return forced


def _propagate(sets: dict[int, set[int]], forced: set[int], cand_profiles,
               profiles) -> np.ndarray:
    """Unit propagation: a record that must be on one line is on no other.

    Returns, per line not held in ``sets``, how many of its candidates were used up (an
    upper bound of what it loses).
    """
    n_lines = len(cand_profiles)
    used: dict[int, int] = {}  # record → the line it must be
    changed = True
    while changed:
        changed = False
        for x in forced - set(used):
            p = profiles.of[x]
            hosts = [i for i in range(n_lines) if (x in sets[i] if i in sets else bool(
                np.isin(p, cand_profiles[i])))]
            if len(hosts) == 1 and len(sets.get(hosts[0], ())) != 1:
                sets[hosts[0]] = {x}  # the one line a known member can be on
                changed = True
        for i, s in sets.items():
            if len(s) == 1:
                (x,) = s
                if used.setdefault(x, i) == i:
                    for j, other in sets.items():
                        if j != i and x in other:
                            other.discard(x)
                            changed = True
    removed = np.zeros(n_lines, dtype=np.int64)
    if used:
        their = profiles.of[np.fromiter(used, dtype=np.int64)]
        for i in range(n_lines):
            if i not in sets:
                removed[i] = int(np.isin(their, cand_profiles[i]).sum())
    return removed


def _hall(found: list[np.ndarray], lines: np.ndarray, weight: np.ndarray) -> int:
    """Smallest candidate set once tight groups of lines use up their records.

    Lines whose candidates all lie in a set U of profiles holding exactly as many records as
    there are such lines must take every record of U: all other lines lose U. Checked per
    distinct candidate set, repeated until nothing changes (profiles are the unit: records of
    one profile are alike to every line). ``found`` are the distinct lines' candidate
    profiles, ``lines`` how many lines each stands for.
    """
    n = int(lines.sum())
    count: Counter[frozenset] = Counter()
    for cand, m in zip(found, lines.tolist(), strict=True):
        count[frozenset(cand.tolist())] += m
    current = {s: s for s in count}  # each distinct original set, as narrowed so far
    frozen: set[frozenset] = set()

    def size(s: frozenset) -> int:
        return int(weight[list(s)].sum()) if s else 0

    changed = True
    while changed:
        changed = False
        live = {s: c for s, c in current.items() if s not in frozen}
        for u in {c for c in live.values() if c}:
            w = size(u)
            if w > n:
                continue
            inside = [s for s, c in live.items() if c <= u]
            if sum(count[s] for s in inside) == w and len(inside) < len(live):
                frozen.update(inside)
                for s in live:
                    if s not in frozen:
                        current[s] = current[s] - u
                changed = True
                break
    return min((size(current[s]) for s in count), default=0)
