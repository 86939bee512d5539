"""VerPart: split one cluster's codes into k^m-anonymous record chunks and an item chunk.

Codes with support < k in the cluster go to the item chunk (their counts are never
published). The rest are ordered so that the codes of one utility constraint are tried
together, and each pass greedily fills one record chunk with every code that keeps the
chunk k^m-anonymous. A pass then gives back the codes of a *second* constraint that did not
all make it in, so they can stay together in a later chunk (the spec's negated reading of the
paper's lines 15–17, the only one that reproduces its worked example).

Records are held as bitsets over the cluster's rows (Python ints): the support of an itemset
is the popcount of the AND of its codes' bitsets, and only itemsets containing the code being
tested need counting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain, combinations

import numpy as np

Row = tuple[int, ...]
#: Code id → constraint number (-1: none); a list is much faster to index than an array.
ConstraintOf = Sequence[int] | np.ndarray


def _ordered_codes(support: Counter[int], frequent: list[int],
                   constraint_of: ConstraintOf) -> list[int]:
    """Group codes by constraint (support desc, then id), groups by their first code."""
    groups: dict[tuple[int, int], list[int]] = {}
    for t in frequent:
        c = constraint_of[t]
        groups.setdefault((c, t) if c < 0 else (c, -1), []).append(t)
    ordered = [sorted(g, key=lambda t: (-support[t], t)) for g in groups.values()]
    ordered.sort(key=lambda g: (-support[g[0]], g[0]))
    return [t for g in ordered for t in g]


def _keeps_anonymity(chunk: list[int], t: int, bits: dict[int, int], k: int, m: int) -> bool:
    """Would ``chunk + [t]`` still be k^m-anonymous, given ``chunk`` is?

    Only itemsets containing ``t`` are new; each must be held by 0 or ≥ k records.
    """
    base = bits[t]
    for size in range(1, min(m - 1, len(chunk)) + 1):
        for others in combinations(chunk, size):
            together = base
            for s in others:
                together &= bits[s]
                if not together:
                    break
            count = together.bit_count()
            if 0 < count < k:
                return False
    return True


def verpart(rows: Sequence[Row], k: int, m: int, constraint_of: ConstraintOf,
            trace: list[tuple[int, str, int]] | None = None
            ) -> tuple[list[list[int]], dict[int, int]]:
    """Chunk domains and item-chunk codes of one cluster (or of a joint cluster's projection).

    Parameters
    ----------
    rows
        The cluster's records as tuples of code ids.
    k, m
        The k^m-anonymity parameters.
    constraint_of
        Code id → constraint number, ``-1`` for codes in no constraint (pass a list when
        calling many times: indexing a numpy array element by element is slow).
    trace
        If given, receives ``(pass, event, code)`` for every decision, event being ``add``,
        ``reject`` (would break k^m-anonymity) or ``give back`` (second constraint split).

    Returns
    -------
    (domains, items)
        ``domains`` lists the codes of each record chunk in the order they were added;
        ``items`` maps each item-chunk code to its support in the cluster (kept private: the
        algorithm needs it for Refine, the release never shows it).
    """
    support: Counter[int] = Counter(chain.from_iterable(rows))
    items = {t: s for t, s in support.items() if s < k}
    frequent = [t for t, s in support.items() if s >= k]
    if len(frequent) <= 1:
        return ([frequent] if frequent else []), items
    remain = _ordered_codes(support, frequent, constraint_of)
    bits = dict.fromkeys(remain, 0)
    for i, row in enumerate(rows):
        flag = 1 << i
        for t in row:
            if t in bits:
                bits[t] |= flag
    domains: list[list[int]] = []
    while remain:
        chunk: list[int] = []
        for t in remain:
            ok = _keeps_anonymity(chunk, t, bits, k, m)
            if ok:
                chunk.append(t)
            if trace is not None:
                trace.append((len(domains) + 1, "add" if ok else "reject", t))
        group_left: Counter[int] = Counter(constraint_of[t] for t in remain)
        in_chunk: Counter[int] = Counter(constraint_of[t] for t in chunk)
        first = constraint_of[chunk[0]]
        kept = [t for t in chunk
                if (c := constraint_of[t]) < 0 or c == first or in_chunk[c] == group_left[c]]
        if trace is not None:
            trace.extend((len(domains) + 1, "give back", t) for t in chunk if t not in kept)
        chunk = kept
        domains.append(chunk)
        taken = set(chunk)
        remain = [t for t in remain if t not in taken]
    return domains, items


def _pairs_within(indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (i, j), i < j, of every pair of elements inside each CSR row."""
    lengths = np.diff(indptr)
    n = int(indptr[-1])
    row = np.repeat(np.arange(len(lengths)), lengths)
    partners = lengths[row] - 1 - (np.arange(n) - indptr[:-1][row])
    first = np.repeat(np.arange(n), partners)
    starts = np.cumsum(partners) - partners
    return first, first + 1 + np.arange(len(first)) - np.repeat(starts, partners)


def single_chunk_clusters(indptr: np.ndarray, indices: np.ndarray, clusters: Sequence[np.ndarray],
                          k: int, m: int
                          ) -> tuple[np.ndarray, list[list[int]], list[dict[int, int]]]:
    """Find, with array operations, the clusters VerPart would leave with one record chunk.

    If the codes with support ≥ k in a cluster are k^m-anonymous *together*, every code
    VerPart tries keeps the chunk anonymous (subsets of an anonymous set are anonymous) and
    nothing is given back (every constraint is complete in the chunk): the result is one
    chunk holding them all. For m ≤ 2 that needs only the pair counts, computed here for all
    clusters at once; for m ≥ 3 only clusters with ≤ 2 such codes qualify.

    Returns
    -------
    (single, frequent, items)
        ``single[p]`` says whether cluster p qualifies; ``frequent[p]`` its codes of support
        ≥ k (sorted) and ``items[p]`` code → support for the others, for every cluster.
    """
    n_codes = int(indices.max(initial=-1)) + 1
    lengths = np.array([len(c) for c in clusters], dtype=np.int64)
    members = np.concatenate(clusters) if len(clusters) else np.zeros(0, dtype=np.int64)
    cluster_of = np.empty(len(indptr) - 1, dtype=np.int64)
    cluster_of[members] = np.repeat(np.arange(len(clusters)), lengths)
    pair_rec = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    pair_key = cluster_of[pair_rec] * n_codes + indices
    keys, support = np.unique(pair_key, return_counts=True)
    key_cluster, key_code = keys // n_codes, keys % n_codes
    frequent_key = support >= k
    # pairs of frequent codes inside one record, counted per cluster
    frequent_pair = frequent_key[np.searchsorted(keys, pair_key)]
    sub_indptr = np.zeros(len(indptr), dtype=np.int64)
    np.cumsum(np.bincount(pair_rec[frequent_pair], minlength=len(indptr) - 1),
              out=sub_indptr[1:])
    codes = indices[frequent_pair]
    a, b = _pairs_within(sub_indptr)
    owner = cluster_of[np.repeat(np.arange(len(indptr) - 1), np.diff(sub_indptr))]
    pair_keys, together = np.unique(owner[a] * n_codes * n_codes + codes[a] * n_codes + codes[b],
                                    return_counts=True)
    pair_owner = pair_keys // (n_codes * n_codes)
    n_frequent = np.bincount(key_cluster[frequent_key], minlength=len(clusters))
    broken = np.zeros(len(clusters), dtype=bool)
    if m >= 2 and len(together):
        broken[pair_owner[together < k]] = True
    single = ~broken if m <= 2 else (~broken & (n_frequent <= 2))
    bounds = np.searchsorted(key_cluster, np.arange(len(clusters) + 1)).tolist()
    code_list, support_list = key_code.tolist(), support.tolist()
    frequent: list[list[int]] = []
    items: list[dict[int, int]] = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        frequent.append([code_list[i] for i in range(lo, hi) if support_list[i] >= k])
        items.append({code_list[i]: support_list[i] for i in range(lo, hi)
                      if support_list[i] < k})
    return single, frequent, items
