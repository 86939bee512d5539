"""Each privacy verifier against a brute-force checker written here, on random releases.

Random small originals (4–10 records over 3–6 codes) get candidate releases built the way
the algorithm would publish them — partitions, chunk domains, joint clusters, censoring —
and then, often, broken by a few random edits (a code added or dropped, a size changed,
a subrecord moved, the declared parameters changed, a record censored too little). The
oracles implement the definitions of the spec pages plainly:

* disassociation (spec 01): every record and shared chunk is k^m-anonymous, counted over
  every itemset of ≤ m codes of every subrecord; Guarantee 1 by *enumerating every
  reconstruction* of every cluster and joint cluster (every alignment of the chunks' shuffled
  subrecords, the item-chunk codes added to the records) and taking, for every itemset S of
  ≤ m codes of an original record, the largest number of reconstructed records holding S;
* GCCens (spec 03): dis(y) counted record by record over the population with multiset
  containment, plus one record per sample patient, sub-multisets and caps;
* (k, k^m) (spec 02), on random originals over the worked example's attributes: records
  grouped by equal demographics (age bounds compared as numbers), every class ≥ k records,
  every itemset of ≤ m generalized codes in a class held by ≥ k of its records (and the
  two weaker requirements the verifier also reports). ``test_kkm_bruteforce.py`` does the
  same from the worked example's own release.

A verifier that accepts what the oracle rejects, or rejects what it accepts, fails the
test. Each test also counts the verdicts it saw and insists both were seen often; the count
lives inside the test, so each test stands alone, in any order or selection.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from itertools import combinations, permutations, product

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ehr_release.model.dataset import Dataset
from ehr_release.privacy.disassociation import check_km
from ehr_release.privacy.gccens import check_kmap
from ehr_release.privacy.kkm import check_kkm
from tests.disassociation_layout import files_of, in_documented_order

FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# =========================================================================== disassociation
CODES = ["250.00", "272.0", "296.01", "401.9", "692.71", "834.0"]


@st.composite
def originals(draw):
    n_codes = draw(st.integers(3, len(CODES)))
    n = draw(st.integers(4, 10))
    records = []
    for _ in range(n):
        chosen = draw(st.lists(st.integers(0, 2), min_size=n_codes, max_size=n_codes))
        records.append([c for c, x in zip(CODES, chosen, strict=False) if x == 0]
                       or [CODES[0]])
    k = draw(st.integers(2, 3))
    m = draw(st.integers(1, 3))
    return records, k, m


def _cluster_sizes(draw, n: int, k: int) -> list[int]:
    """Clusters of k..4 records (the last one takes what is left, ≤ 2k − 1); now and
    then one of k − 1 records (too small)."""
    sizes, left = [], n
    while left:
        lowest = k - 1 if draw(st.integers(0, 7)) == 0 else k
        size = left if left < 2 * k else draw(st.integers(lowest, min(4, left - k)))
        sizes.append(size)
        left -= size
    return sizes


@st.composite
def disassociated(draw):
    """An original, k, m and a release derived from it (then perhaps broken)."""
    records, k, m = draw(originals())
    order = draw(st.permutations(range(len(records))))
    clusters, start = [], 0
    for size in _cluster_sizes(draw, len(records), k):
        members = [set(records[i]) for i in order[start:start + size]]
        start += size
        domain = sorted(set().union(*members))
        # each code goes to one of ≤ 3 record chunks or to the item chunk (-1); "careful"
        # releases, like VerPart, put the codes held by < k records in the item chunk,
        # "safe" ones also give each frequent code a chunk of its own (3 at most)
        mode = draw(st.sampled_from(["random", "careful", "safe"]))
        support = {c: sum(c in r for r in members) for c in domain}
        if mode == "safe":
            frequent = [c for c in domain if support[c] >= k][:3]
            place = {c: frequent.index(c) if c in frequent else -1 for c in domain}
        else:
            place = {c: -1 if mode == "careful" and support[c] < k
                     else draw(st.integers(-1, 2)) for c in domain}
        chunks = []
        for g in sorted({p for p in place.values() if p >= 0}):
            ti = {c for c in domain if place[c] == g}
            chunk = [sorted(r & ti) for r in members]
            chunks.append(draw(st.permutations(chunk)))
        clusters.append({"id": f"P{len(clusters) + 1}", "size": size,
                         "record_chunks": [list(ch) for ch in chunks],
                         "item_chunk": sorted(c for c in domain if place[c] < 0),
                         "_members": members})
    joints = []
    pairs = [(a, b) for a, b in combinations(range(len(clusters)), 2)
             if clusters[a]["size"] + clusters[b]["size"] <= 6]
    if pairs and draw(st.integers(0, 3)):
        a, b = draw(st.sampled_from(pairs))
        # like Refine: codes of the two item chunks that neither cluster has in a chunk
        in_chunks = {x for i in (a, b) for ch in clusters[i]["record_chunks"]
                     for s in ch for x in s}
        pool = sorted((set(clusters[a]["item_chunk"]) | set(clusters[b]["item_chunk"]))
                      - in_chunks)
        shared = draw(st.sets(st.sampled_from(pool), min_size=1)) if pool else set()
        if shared:
            for i in (a, b):
                clusters[i]["item_chunk"] = [c for c in clusters[i]["item_chunk"]
                                             if c not in shared]
            rows = [sorted(r & shared) for i in (a, b) for r in clusters[i]["_members"]]
            joints.append({"clusters": [clusters[a]["id"], clusters[b]["id"]],
                           "shared_chunks": [list(draw(st.permutations(rows)))]})
    for c in clusters:
        del c["_members"]
    doc = {"algorithm": "disassociation", "k": k, "m": m, "clusters": clusters,
           "joint_clusters": joints}
    edits = draw(st.lists(st.integers(0, 8), max_size=2))
    for edit in edits:
        _break(draw, doc, edit)
    return records, k, m, doc, bool(edits)


def _subrecords(doc) -> list[list[str]]:
    return [s for c in doc["clusters"] for ch in c["record_chunks"] for s in ch] + \
           [s for j in doc["joint_clusters"] for ch in j["shared_chunks"] for s in ch]


def _break(draw, doc, edit: int) -> None:
    """One random edit; some leave the release well formed, some do not."""
    clusters = doc["clusters"]
    subs = _subrecords(doc)
    if edit == 0 and any(subs):  # drop a code from a subrecord
        sub = draw(st.sampled_from([s for s in subs if s]))
        sub.remove(draw(st.sampled_from(sub)))
    elif edit == 1 and subs:  # add a code to a subrecord (maybe one it already has)
        draw(st.sampled_from(subs)).append(draw(st.sampled_from(CODES)))
    elif edit == 2:  # add a code to an item chunk, or remove one
        c = draw(st.sampled_from(clusters))
        code = draw(st.sampled_from(CODES))
        if code in c["item_chunk"]:
            c["item_chunk"].remove(code)
        else:
            c["item_chunk"].append(code)
    elif edit == 3:  # a cluster claims one record more or less
        c = draw(st.sampled_from(clusters))
        c["size"] += draw(st.sampled_from([-1, 1]))
    elif edit == 4:  # swap two subrecords of two chunks (same or other cluster)
        chunks = [ch for c in clusters for ch in c["record_chunks"]] + \
                 [ch for j in doc["joint_clusters"] for ch in j["shared_chunks"]]
        if len(chunks) >= 2:
            x, y = draw(st.lists(st.sampled_from(range(len(chunks))), min_size=2,
                                 max_size=2, unique=True))
            i = draw(st.integers(0, len(chunks[x]) - 1))
            j = draw(st.integers(0, len(chunks[y]) - 1))
            chunks[x][i], chunks[y][j] = chunks[y][j], chunks[x][i]
    elif edit == 5:  # declare other parameters
        key = draw(st.sampled_from(["k", "m"]))
        doc[key] += 1
    elif edit == 6:  # a subrecord replaced by a copy of its neighbour (counts inflate)
        chunks = [ch for c in clusters for ch in c["record_chunks"] if len(ch) >= 2]
        if chunks:
            ch = draw(st.sampled_from(chunks))
            i = draw(st.integers(0, len(ch) - 2))
            ch[i + 1] = list(ch[i])
    elif edit == 7:  # two chunks of a cluster merged into one (a subrecord-wise union)
        multi = [c for c in clusters if len(c["record_chunks"]) >= 2]
        if multi:
            c = draw(st.sampled_from(multi))
            a, b = c["record_chunks"][:2]
            c["record_chunks"][:2] = [[sorted(set(x) | set(y)) for x, y in
                                       zip(a, b, strict=True)]]
    elif edit == 8:  # an item-chunk code moved into a record chunk
        c = draw(st.sampled_from(clusters))
        if c["item_chunk"] and c["record_chunks"]:
            code = c["item_chunk"].pop(draw(st.integers(0, len(c["item_chunk"]) - 1)))
            ch = draw(st.sampled_from(c["record_chunks"]))
            for i in draw(st.sets(st.integers(0, len(ch) - 1), min_size=1)):
                ch[i] = sorted(set(ch[i]) | {code})


# --------------------------------------------------------------------------- the oracle
def _itemsets(codes, m: int):
    items = sorted(set(codes))
    for size in range(1, min(m, len(items)) + 1):
        yield from combinations(items, size)


def well_formed(doc, n: int, k: int) -> bool:
    """The release's shape, plainly: a partition into clusters of ≥ k records, chunk
    lengths, subrecords without repeats, joint clusters, and disjoint domains (record
    chunks, item chunk, shared chunks) inside each cluster."""
    clusters = {c["id"]: c for c in doc["clusters"]}
    if len(clusters) != len(doc["clusters"]):
        return False
    if sum(c["size"] for c in doc["clusters"]) != n:
        return False
    if any(len(set(s)) != len(s) for s in _subrecords(doc)):
        return False
    # the Parquet layout (issue 18) also requires codes in order in subrecords and item chunks
    if any(list(s) != sorted(set(s)) for s in _subrecords(doc) + [c["item_chunk"]
                                                              for c in doc["clusters"]]):
        return False
    shared_domains: dict[str, list[set[str]]] = {cid: [] for cid in clusters}
    seen_in_joint: set[str] = set()
    for j in doc["joint_clusters"]:
        members = j["clusters"]
        if len(members) < 2 or len(set(members)) != len(members):
            return False
        if any(x not in clusters or x in seen_in_joint for x in members):
            return False
        seen_in_joint |= set(members)
        total = sum(clusters[x]["size"] for x in members)
        for ch in j["shared_chunks"]:
            if len(ch) != total:
                return False
            for x in members:
                shared_domains[x].append(set().union(*map(set, ch)))
    for c in doc["clusters"]:
        if c["size"] < k or any(len(ch) != c["size"] for ch in c["record_chunks"]):
            return False
        domains = [set().union(*map(set, ch)) for ch in c["record_chunks"]]
        domains += [set(c["item_chunk"])] + shared_domains[c["id"]]
        everything = [code for d in domains for code in d]
        if len(everything) != len(set(everything)):
            return False
    return True


def chunks_anonymous(doc, k: int, m: int) -> bool:
    chunks = [ch for c in doc["clusters"] for ch in c["record_chunks"]]
    chunks += [ch for j in doc["joint_clusters"] for ch in j["shared_chunks"]]
    for chunk in chunks:
        counts = Counter(s for sub in chunk for s in _itemsets(sub, m))
        if any(v < k for v in counts.values()):
            return False
    return True


def _alignments(chunks: list[list[int]], size: int) -> np.ndarray:
    """Every reconstruction of one cluster's record chunks: rows of ``size`` code masks."""
    if not chunks:
        return np.zeros((1, size), dtype=np.int64)
    first = np.array(chunks[0], dtype=np.int64)
    rest = [np.array(sorted(set(permutations(ch))), dtype=np.int64).reshape(-1, size)
            for ch in chunks[1:]]
    out = []
    for choice in product(*rest):
        rows = first.copy()
        for perm in choice:
            rows = rows | perm
        out.append(rows)
    return np.unique(np.array(out), axis=0)


def reconstruction_caps(doc, records: list[list[str]], m: int) -> dict[tuple[str, ...], int]:
    """For every ≤ m-itemset S of an original record, the largest number of records holding
    S in some reconstruction, by trying every reconstruction (parts are independent, so the
    largest total is the sum of each cluster's and joint cluster's largest count)."""
    codes = sorted(set(CODES) | {x for r in records for x in r} |
                   {x for s in _subrecords(doc) for x in s} |
                   {x for c in doc["clusters"] for x in c["item_chunk"]})
    bit = {c: 1 << i for i, c in enumerate(codes)}

    def mask(sub) -> int:
        return sum(bit[x] for x in set(sub))

    queries = sorted({s for r in records for s in _itemsets(r, m)})
    q = np.array([mask(s) for s in queries], dtype=np.int64)
    best = np.zeros(len(q), dtype=np.int64)

    def add_part(recon: np.ndarray) -> None:
        # recon: (reconstructions, records) masks; a record holds S if S ⊆ its codes
        for lo in range(0, len(q), 8):
            holds = (q[None, None, lo:lo + 8] & ~recon[:, :, None]) == 0
            best[lo:lo + 8] += holds.sum(axis=1).max(axis=0)

    def cluster_recon(c) -> np.ndarray:
        chunks = [[mask(s) for s in ch] for ch in c["record_chunks"]]
        return _alignments(chunks, c["size"]) | mask(c["item_chunk"])  # items: to anyone

    by_id = {c["id"]: c for c in doc["clusters"]}
    joined: set[str] = set()
    for j in doc["joint_clusters"]:
        members = [by_id[x] for x in j["clusters"]]
        joined |= set(j["clusters"])
        combos = np.array([np.concatenate(parts) for parts in
                           product(*(cluster_recon(c) for c in members))], dtype=np.int64)
        total = combos.shape[1]
        for ch in j["shared_chunks"]:  # each shared chunk aligned with the records anyhow
            perms = np.array(sorted(set(permutations([mask(s) for s in ch]))),
                             dtype=np.int64).reshape(-1, total)
            combos = np.unique((combos[:, None, :] | perms[None, :, :]).reshape(-1, total),
                               axis=0)
        add_part(combos)
    for c in doc["clusters"]:
        if c["id"] not in joined:
            add_part(cluster_recon(c))
    return dict(zip(queries, best.tolist(), strict=True))


def guarantee_1(doc, records: list[list[str]], k: int, m: int) -> bool:
    """Every ≤ m-itemset of an original record can be held by ≥ k reconstructed records."""
    return all(v >= k for v in reconstruction_caps(doc, records, m).values())


def _passed(report, name: str) -> bool:
    return next(r for r in report.requirements if r.name == name).passed


def test_disassociation_verifier_agrees_with_brute_force() -> None:
    seen: Counter[str] = Counter()

    @FUZZ
    @given(disassociated())
    def agrees(case) -> None:
        seen[_check_disassociation(case)] += 1

    agrees()
    assert seen["accepted"] >= 10 and seen["rejected"] >= 10, seen


def _check_disassociation(case) -> str:
    """Assert the verifier's verdicts are the oracle's; say which verdict it was."""
    records, k, m, doc, edited = case
    report = check_km(files_of(doc),
                            Dataset.from_records(records), k, m)
    formed = well_formed(doc, len(records), k)
    declared = doc["k"] == k and doc["m"] == m
    assert (_passed(report, "release format") and _passed(report, "structure")) == \
        (formed and declared), (doc, report.failures)
    if not declared:
        assert not report.holds
    if not formed:  # fails closed: nothing is vouched for
        assert not report.holds
        assert not _passed(report, "chunk k^m-anonymity")
        assert not _passed(report, "Guarantee 1")
        event("disassociation: malformed")
        return "malformed"
    expected = {"chunk k^m-anonymity": chunks_anonymous(doc, k, m),
                "Guarantee 1": guarantee_1(doc, records, k, m)}
    for name, verdict in expected.items():
        assert _passed(report, name) == verdict, (name, verdict, records, k, m, doc)
    if not edited:  # built from the original: the original is one of its reconstructions
        assert _passed(report, "truthfulness"), report.failures
    private = all(expected.values()) and declared
    event(f"disassociation: chunks {expected['chunk k^m-anonymity']}, "
          f"G1 {expected['Guarantee 1']}, m={m}, joint={bool(doc['joint_clusters'])}")
    return "accepted" if private else "rejected"


SPEC_EXAMPLE = [
    "296.00 296.01 296.02 834.0 944.01", "296.00 296.01 296.02 401.0 944.01 692.71 695.10",
    "296.00 296.02 692.71 834.0 695.10", "296.00 296.01 692.71 401.0",
    "296.00 296.01 296.02 692.71 695.10", "296.03 295.04 404.00 480.1",
    "294.10 296.03 834.0 944.01", "294.10 295.04 296.03 480.1", "294.10 295.04 404.00",
    "294.10 295.04 296.03 834.0 944.01"]


def test_the_oracle_on_the_spec_example() -> None:
    """The oracle itself, on spec 01's worked example (k = 3, m = 2): {296.01, 834.0}, unique
    in D, can be matched by up to 4 records of a reconstruction; the release meets
    Guarantee 1 for k = 3, and its chunks are 3^2-anonymous."""
    records = [r.split() for r in SPEC_EXAMPLE]
    p1, p2 = [set(r) for r in records[:5]], [set(r) for r in records[5:]]

    def chunk(rows, domain: str) -> list[list[str]]:
        return [sorted(r & set(domain.split())) for r in rows]

    doc = {"algorithm": "disassociation", "k": 3, "m": 2, "clusters": [
        {"id": "P1", "size": 5, "item_chunk": ["401.0"], "record_chunks": [
            chunk(p1, "296.00 296.01 296.02"), chunk(p1, "692.71 695.10")]},
        {"id": "P2", "size": 5, "item_chunk": ["404.00", "480.1"], "record_chunks": [
            chunk(p2, "294.10 295.04 296.03")]}],
        "joint_clusters": [{"clusters": ["P1", "P2"],
                            "shared_chunks": [chunk(p1 + p2, "834.0 944.01")]}]}
    caps = reconstruction_caps(doc, records, 2)
    assert caps[("296.01", "834.0")] == 4
    assert caps[("834.0", "944.01")] == 3 and caps[("401.0",)] == 5
    assert guarantee_1(doc, records, 3, 2) and not guarantee_1(doc, records, 4, 2)
    assert chunks_anonymous(doc, 3, 2) and well_formed(doc, 10, 3)
    report = check_km(files_of(doc), Dataset.from_records(records), 3, 2)
    # written in record order, the example's chunks are aligned: only the order is refused
    assert [r.name for r in report.failures] == ["subrecord order"]
    report = check_km(files_of(in_documented_order(doc)), Dataset.from_records(records), 3, 2)
    assert report.holds, report.failures
    # an unmatched shared subrecord: 834.0 is then held by 3 records, {834.0, 944.01} by 2
    weak = copy.deepcopy(doc)
    weak["joint_clusters"][0]["shared_chunks"][0][0] = ["944.01"]
    assert not guarantee_1(weak, records, 3, 2) and not chunks_anonymous(weak, 3, 2)


# =========================================================================== GCCens
GC_CODES = ["250", "272", "401", "724"]
multisets = st.dictionaries(st.sampled_from(GC_CODES), st.integers(1, 3), max_size=4)


@st.composite
def censored(draw):
    """A population, a sample drawn from it, k, caps and a candidate censored release."""
    population = draw(st.lists(multisets, min_size=4, max_size=12))
    chosen = draw(st.lists(st.integers(0, len(population) - 1), min_size=1, max_size=6,
                           unique=True))
    ids = [f"p{i}" for i in chosen]
    sample = [dict(population[i]) for i in chosen]
    k = draw(st.integers(2, 3))
    caps = draw(st.dictionaries(st.sampled_from([*GC_CODES, "*"]), st.integers(0, 3),
                                max_size=3))
    # censoring: GCCens' own output (the spec's loop, brute force below), or each record
    # keeps a random sub-multiset, usually within the caps
    released = [] if draw(st.booleans()) else gccens_spec(population, sample, k, caps)
    for rec in sample if not released else []:
        kept = {}
        for code, n in rec.items():
            limit = caps.get(code, caps.get("*", n))
            keep = draw(st.integers(0, n if draw(st.integers(0, 5)) == 0 else min(n, limit)))
            if keep:
                kept[code] = keep
        released.append(kept)
    rows = sorted(zip(ids, released, strict=True))  # the documented line order
    edit = draw(st.integers(0, 11))
    if edit == 4 and len(rows) > 1:  # lines out of order
        rows.reverse()
    if edit == 0 and rows:  # a patient dropped
        rows.pop(draw(st.integers(0, len(rows) - 1)))
    elif edit == 1 and rows:  # a patient twice
        rows.append(draw(st.sampled_from(rows)))
    elif edit == 2:  # a stranger
        rows.append(("stranger", {}))
    elif edit == 3 and rows:  # an instance the patient never had
        i = draw(st.integers(0, len(rows) - 1))
        code = draw(st.sampled_from(GC_CODES))
        rows[i] = (rows[i][0], {**rows[i][1], code: rows[i][1].get(code, 0) + 1})
    return population, ids, sample, k, caps, rows


def _dis(population, rec) -> int:
    return sum(all(p.get(code, 0) >= n for code, n in rec.items()) for p in population)


def gccens_spec(population, sample, k, caps) -> list[dict[str, int]]:
    """GCCens as spec 03 §1 writes it, by brute force: clamp to the caps (declared, else the
    sample's maximum; then to the largest count present); while a record has dis < k,
    censor one instance of the code with the fewest records at its cap (ties: lowest code)
    from each of them."""
    top = {c: max(r.get(c, 0) for r in sample) for r in sample for c in r}
    cap = {c: min(t, caps.get(c, caps.get("*", t))) for c, t in top.items()}
    recs = [{c: min(n, cap[c]) for c, n in r.items() if min(n, cap[c])} for r in sample]
    cap = {c: max([r.get(c, 0) for r in recs]) for c in cap}
    while any(_dis(population, r) < k for r in recs) and any(cap.values()):
        code = min((c for c in cap if cap[c]),
                   key=lambda c: (sum(r.get(c) == cap[c] for r in recs), c))
        for r in recs:
            if r.get(code) == cap[code]:
                r[code] -= 1
                if not r[code]:
                    del r[code]
        cap[code] -= 1
    return recs


def gccens_oracle(population, ids, sample, k, caps, rows) -> bool:
    original = dict(zip(ids, sample, strict=True))
    released_ids = [pid for pid, _ in rows]
    if sorted(released_ids) != sorted(ids):  # one record per sample patient, no others
        return False
    if released_ids != sorted(released_ids):  # lines in the documented order
        return False
    exact = dict(zip(ids, gccens_spec(population, sample, k, caps), strict=True))
    if any(rec != exact[pid] for pid, rec in rows):  # exactly what GCCens leaves
        return False
    for pid, rec in rows:
        if any(n > original[pid].get(code, 0) for code, n in rec.items()):
            return False
        for code, n in rec.items():
            sample_max = max(r.get(code, 0) for r in sample)
            cap = caps[code] if code in caps else caps.get("*", sample_max)
            if n > cap:
                return False
        dis = sum(all(p.get(code, 0) >= n for code, n in rec.items()) for p in population)
        if dis < k:
            return False
    return len(population) >= k


def test_gccens_verifier_agrees_with_brute_force() -> None:
    seen: Counter[str] = Counter()

    @FUZZ
    @given(censored())
    def agrees(case) -> None:
        seen[_check_gccens(case)] += 1

    agrees()
    assert seen["accepted"] >= 10 and seen["rejected"] >= 10, seen


def _check_gccens(case) -> str:
    population, ids, sample, k, caps, rows = case
    files = {"censored.jsonl": "".join(json.dumps({"patient_id": pid, "codes": rec}) + "\n"
                                       for pid, rec in rows).encode(),
             "censoring.json": json.dumps({"k": k, "caps": caps}).encode()}
    report = check_kmap(files, ids, sample, population, k, caps)
    expected = gccens_oracle(population, ids, sample, k, caps, rows)
    assert report.holds == expected, (case, report.failures)
    event(f"gccens: {'accepted' if expected else 'rejected'}")
    return "accepted" if expected else "rejected"


# =========================================================================== (k, k^m)
# The worked example's configuration (spec 02): age 19–51, origin and gender hierarchies.
ORIGINS = {"Africa": ["Algeria", "Nigeria", "Ghana"],
           "Europe": ["France", "Greece", "Italy", "Spain", "Portugal"]}
GENERALIZED = {"053.20": ["053.20", "053.71"], "053.71": ["053.20", "053.71"],
               "458.1": ["458.1", "458.21"], "458.21": ["458.1", "458.21"],
               "493.2": ["493.2"], "494.1": ["494.1"]}


@st.composite
def kkm_releases(draw):
    """A random original over the example's attributes and an RT release derived from it
    by clustering (demographics generalized to the cluster's box, codes to their groups),
    then perhaps edited: a record moved to another class, a code group dropped or added,
    bounds written as floats, codes listed in another order."""
    n = draw(st.integers(4, 10))
    rows = []
    for _ in range(n):
        continent = draw(st.sampled_from(sorted(ORIGINS)))
        codes = draw(st.sets(st.sampled_from(sorted(GENERALIZED)), min_size=1, max_size=4))
        rows.append((draw(st.integers(19, 51)), continent,
                     draw(st.sampled_from(ORIGINS[continent])),
                     draw(st.sampled_from(["Male", "Female"])), sorted(codes)))
    k = draw(st.integers(2, 3))
    m = draw(st.integers(1, 3))
    order = draw(st.permutations(range(n)))
    records, start = [], 0
    for number, size in enumerate(_cluster_sizes(draw, n, k)):
        members = [rows[i] for i in order[start:start + size]]
        start += size
        continents = {r[1] for r in members}
        origins = {r[2] for r in members}
        origin = origins.pop() if len(origins) == 1 else \
            continents.pop() if len(continents) == 1 else "All"
        genders = {r[3] for r in members}
        demo = {"age": [min(r[0] for r in members), max(r[0] for r in members)],
                "origin": origin, "gender": genders.pop() if len(genders) == 1 else "All"}
        # like ArtUC's suppression, a cluster may publish only the groups all members hold
        common = set.intersection(*({tuple(GENERALIZED[c]) for c in r[4]} for r in members))
        suppress = draw(st.booleans())
        for r in members:
            groups = sorted(common if suppress else {tuple(GENERALIZED[c]) for c in r[4]})
            records.append({"cluster": f"C{number}", "demographics": dict(demo),
                            "codes": [list(g) for g in groups]})
    for edit in draw(st.lists(st.integers(0, 4), max_size=2)):
        i = draw(st.integers(0, len(records) - 1))
        rec = records[i]
        if edit == 0:  # joins another record's class
            other = draw(st.sampled_from(records))
            rec["demographics"] = dict(other["demographics"])
            rec["cluster"] = other["cluster"]
        elif edit == 1 and rec["codes"]:  # a generalized code dropped
            rec["codes"].pop(draw(st.integers(0, len(rec["codes"]) - 1)))
        elif edit == 2:  # a generalized code added (one the record does not hold yet,
            # whatever order an earlier edit 4 listed its codes in)
            group = list(GENERALIZED[draw(st.sampled_from(sorted(GENERALIZED)))])
            if sorted(group) not in [sorted(held) for held in rec["codes"]]:
                rec["codes"].append(group)
        elif edit == 3:  # the same box written with float bounds: still the same class
            rec["demographics"]["age"] = [float(x) for x in rec["demographics"]["age"]]
        elif edit == 4:  # the same generalized codes, listed in another order
            rec["codes"] = [list(reversed(g)) for g in reversed(rec["codes"])]
    demo = pd.DataFrame([(age, origin, gender) for age, _, origin, gender, _ in rows],
                        columns=["age", "origin", "gender"])
    original = Dataset.from_records([r[4] for r in rows], demo,
                                    patient_ids=[str(i) for i in range(n)])
    return original, records, k, m


def _supported(records: list[dict], k: int, m: int) -> bool:
    """Every itemset of ≤ m generalized codes present in ``records`` is held by ≥ k."""
    counts = Counter(s for r in records  # a generalized code: its set of codes
                     for s in _itemsets([tuple(sorted(set(g))) for g in r["codes"]], m))
    return all(v >= k for v in counts.values())


def kkm_oracle(records: list[dict], k: int, m: int) -> dict[str, bool]:
    classes: dict[tuple, list[dict]] = {}
    for r in records:  # a class: the same age box (as numbers), origin and gender
        d = r["demographics"]
        key = (float(d["age"][0]), float(d["age"][1]), d["origin"], d["gender"])
        classes.setdefault(key, []).append(r)
    sizes_ok = all(len(c) >= k for c in classes.values())
    return {"(k, k^m)-anonymity": sizes_ok and all(_supported(c, k, m)
                                                     for c in classes.values()),
            "k-anonymity of the demographics alone": sizes_ok,
            "k^m-anonymity of the codes alone": _supported(records, k, m)}


@pytest.fixture(scope="module")
def kkm_config():
    from ehr_release.configuration.constraints import parse_config
    from tests.test_artuc_worked_example import CONFIG

    return parse_config(CONFIG, lambda ref: pytest.fail(f"no file hierarchy: {ref}"))


def test_kkm_verifier_agrees_with_brute_force(kkm_config) -> None:
    seen: Counter[str] = Counter()

    @FUZZ
    @given(case=kkm_releases())
    def agrees(case) -> None:
        seen[_check_kkm(kkm_config, case)] += 1

    agrees()
    assert seen["accepted"] >= 10 and seen["rejected"] >= 10, seen


def _check_kkm(kkm_config, case) -> str:
    original, records, k, m = case
    from tests.kkm_release import to_files

    report = check_kkm(to_files(records, canonical=True), original, kkm_config,
                        algorithm="artuc",
                        k=k, m=m, delta=None, epsilon=100, constrained=False)
    for name, verdict in kkm_oracle(records, k, m).items():
        assert _passed(report, name) == verdict, (name, verdict, records, k, m)
    private = _passed(report, "(k, k^m)-anonymity")
    event(f"kkm: {'accepted' if private else 'rejected'}, m={m}")
    return "accepted" if private else "rejected"
