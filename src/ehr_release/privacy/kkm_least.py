"""The truthful assignment that suppresses least, on which the (k, k^m) verifier judges ε.

Which cluster an original record joined is not published, and clusters may share or overlap
generalized demographics, so several complete assignments of original rows to released
records ("slots": a cluster's generalized item set, as many as records show it) can be
truthful. The verifier counts the one that suppresses least — fewest codes lost, distinct per
cluster (what ε bounds); among those, fewest lost occurrences (UL's Σ s(r)) — so no honest
release is refused for the verifier's choice. A greedy matching (loss-free edges first, then
augmenting paths) overcounted: 22 codes where ArtUC lost 21, on a release the property test
found.

A code lost by one or by ten rows of a cluster counts once, so the cost couples every row of
a cluster and is not a sum over edges: it is minimised exactly as a MILP (HiGHS, through
SciPy). Rows, slots and clusters split into connected components that are solved apart; a
component the given assignment already serves without loss, or where every row has one
place and every row is needed, has nothing to improve. Rows with the same edges losing the
same codes are interchangeable and enter the MILP as one integer count.

A component the solver does not settle within its time limit keeps the best complete
assignment it knows (the given one or the solver's incumbent): the count may then be too
high — an honest release refused, never a leaky one passed — but it is always the count of a
complete truthful assignment. Such components are reported as ``unproven``, and since the
limits are in seconds their count can differ between machines or runs (never below the
least). That is why the verifier asks for this only when its matching's assignment exceeds ε
(:func:`ehr_release.privacy.kkm._suppression`): every other verdict is settled in linear time
and reads the same everywhere. Small releases (the property tests, the MIMIC demo) are solved
exactly in milliseconds. Large generated ones are not: on bench/artuc.py's EHRD-like data at
52,096 records, 13 components of 60–8,941 rows (2–5 possible clusters per row) need the
solver; those of 60–842 rows (and one of 7,894, nearly all forced) are proven in under a
second, two of 1,215 and 3,113 rows in 10–20 s, the other seven not in 25–120 s each (gaps
left 0.2–1.2 %; HiGHS spends that time at the root node). Solving every release there took
42–45 s instead of 9 s.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

#: Seconds HiGHS may spend on one component, and on all of them (smallest first: the
#: likeliest proofs), before the best complete assignment known is kept unproven.
TIME_LIMIT = 5.0
BUDGET = 30.0

Lost = Mapping[tuple[int, int], frozenset[str]]  # (row, slot) → codes lost; absent: none


@dataclass(frozen=True)
class Least:
    """The least-suppressing assignment found: row → slot, and how it was settled."""

    owner: dict[int, int]
    solved: int  # components that needed the solver
    unproven: int  # of those, components not solved to optimality (count may be high)


def cost(pairs: Iterable[tuple[int, int]], lost: Lost, cluster: list[str]) -> tuple[int, int]:
    """(codes lost distinct per cluster, occurrences lost) of (row, slot) pairs."""
    per: dict[str, set[str]] = defaultdict(set)
    occurrences = 0
    for pair in pairs:
        codes = lost.get(pair)
        if codes:
            per[cluster[pair[1]]].update(codes)
            occurrences += len(codes)
    return sum(len(v) for v in per.values()), occurrences


def least_suppressing(owner: dict[int, int], adj: Mapping[int, list[int]], lost: Lost,
                      capacity: list[int], cluster: list[str],
                      time_limit: float = TIME_LIMIT, budget: float = BUDGET) -> Least:
    """Improve the complete assignment ``owner`` (every slot filled to ``capacity``, rows
    once) to one that loses least, lexicographically (distinct codes, then occurrences).

    ``adj`` lists each row's truthful slots, ``cluster`` each slot's cluster. Components
    are solved in turn, each for at most ``time_limit`` seconds and all within ``budget``.
    """
    ends = time.monotonic() + budget
    component = _components(adj, cluster)
    lossy = {component[s] for row, s in owner.items() if (row, s) in lost}
    if not lossy:
        return Least(dict(owner), 0, 0)
    rows_of: dict[int, list[int]] = defaultdict(list)
    for row, slots in adj.items():
        if component[slots[0]] in lossy:
            rows_of[component[slots[0]]].append(row)
    slots_of: dict[int, list[int]] = defaultdict(list)
    for s, c in enumerate(component):
        if c in lossy:
            slots_of[c].append(s)
    out = dict(owner)
    solved = unproven = 0
    for c in sorted(lossy, key=lambda c: (len(rows_of[c]), c)):  # the likeliest proofs first
        rows, slots = rows_of[c], slots_of[c]
        if len(rows) == sum(capacity[s] for s in slots) and all(len(adj[r]) == 1 for r in rows):
            continue  # forced: every row needed, each in its one place
        solved += 1
        left = min(time_limit, ends - time.monotonic())
        found, optimal = (_solve(rows, slots, adj, lost, capacity, cluster, left) if left > 0
                          else (None, False))
        if not optimal:
            unproven += 1
        if found is not None and (cost(found.items(), lost, cluster)
                                  < cost(((r, owner[r]) for r in rows if r in owner),
                                         lost, cluster)):
            for r in rows:
                out.pop(r, None)
            out.update(found)
    return Least(out, solved, unproven)


def _components(adj: Mapping[int, list[int]], cluster: list[str]) -> list[int]:
    """Each slot's component: slots joined by a shared row or a shared cluster."""
    parent = list(range(len(cluster)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first: dict[str, int] = {}
    for s, name in enumerate(cluster):
        union(s, first.setdefault(name, s))
    for slots in adj.values():
        for s in slots[1:]:
            union(slots[0], s)
    return [find(s) for s in range(len(cluster))]


def _solve(rows: list[int], slots: list[int], adj: Mapping[int, list[int]], lost: Lost,
           capacity: list[int], cluster: list[str], time_limit: float
           ) -> tuple[dict[int, int] | None, bool]:
    """One component's least-losing complete assignment, and whether its distinct count is
    proven least.

    Variables: x[g, s] = rows of group g (same edges, same losses) placed in slot s, integer;
    y[C, c] = 1 when cluster C loses code c, binary. Σ_g x[g, s] = capacity(s);
    Σ_s x[g, s] ≤ |g| (= |g| when the component has no row to spare); x[g, s] ≤ |g|·y[C, c]
    for each code c the edge loses. A code only one row can lose in C needs no y: the edge's
    x is its indicator. First minimise the codes lost (Σ y and those edges); then, held to
    that many, the occurrences Σ |lost(g, s)|·x[g, s]. Two solves, not one weighted
    objective: HiGHS proves the first alone far sooner, and the tie-break (UL only) keeps the
    first solve's assignment if it cannot improve on it in time.
    """
    groups: dict[tuple[tuple[int, frozenset[str]], ...], list[int]] = defaultdict(list)
    for r in rows:
        groups[tuple(sorted((s, lost.get((r, s), frozenset())) for s in adj[r]))].append(r)
    edges: list[tuple[int, int, frozenset[str]]] = []  # (group, slot, lost codes)
    members = list(groups.values())
    for g, key in enumerate(groups):
        edges.extend((g, s, codes) for s, codes in key)
    n_x = len(edges)
    upper = np.array([min(len(members[g]), capacity[s]) for g, s, _ in edges], dtype=float)
    losing: dict[tuple[str, str], list[int]] = defaultdict(list)  # (C, c) → edges losing c
    for i, (_, s, codes) in enumerate(edges):
        for code in sorted(codes):
            losing[(cluster[s], code)].append(i)
    distinct = np.zeros(n_x)
    flag: dict[tuple[str, str], int] = {}
    for key, ids in losing.items():
        if len(ids) == 1 and upper[ids[0]] == 1:
            distinct[ids[0]] += 1  # one row alone can lose it: y = x, no variable
        else:
            flag[key] = len(flag)
    n = n_x + len(flag)
    slot_index = {s: i for i, s in enumerate(slots)}
    triples = [(slot_index[s], i, 1.0) for i, (_, s, _) in enumerate(edges)]  # slots filled
    lb = [float(capacity[s]) for s in slots]
    ub = list(lb)
    every = len(rows) == sum(capacity[s] for s in slots)  # then each row is placed
    by_group: dict[int, list[int]] = defaultdict(list)
    for i, (g, _, _) in enumerate(edges):
        by_group[g].append(i)
    for g, ids in by_group.items():  # each row at most once
        if len(ids) > 1:
            triples += [(len(lb), i, 1.0) for i in ids]
            lb.append(float(len(members[g])) if every else 0.0)
            ub.append(float(len(members[g])))
    for key, y in flag.items():  # a row placed where it loses c: C loses c
        for i in losing[key]:
            triples += [(len(lb), i, 1.0), (len(lb), n_x + y, -upper[i])]
            lb.append(-np.inf)
            ub.append(0.0)
    codes_lost = np.concatenate([distinct, np.ones(len(flag))])
    bounds = Bounds(np.zeros(n), np.concatenate([upper, np.ones(len(flag))]))
    ends = time.monotonic() + time_limit

    def solve(objective: np.ndarray, extra: list[tuple[np.ndarray, float]]) -> Any:
        r_idx, c_idx, vals = (list(t) for t in zip(*triples, strict=True))
        lows, highs = list(lb), list(ub)
        for coefficients, most in extra:
            nz = np.flatnonzero(coefficients)
            r_idx += [len(lows)] * len(nz)
            c_idx += nz.tolist()
            vals += coefficients[nz].tolist()
            lows.append(-np.inf)
            highs.append(most)
        matrix = sparse.csr_array((vals, (r_idx, c_idx)), shape=(len(lows), n))
        return milp(objective, integrality=np.ones(n), bounds=bounds,
                    constraints=LinearConstraint(matrix, lows, highs),
                    options={"time_limit": max(ends - time.monotonic(), 0.0),
                             "mip_rel_gap": 0.0})

    first = solve(codes_lost, [])
    if first.x is None:
        return None, False
    best = _assignment(first.x[:n_x], edges, members, slots, capacity)
    if best is not None and first.status == 0 and time.monotonic() < ends:
        occurrences = np.concatenate([[len(c) for _, _, c in edges], np.zeros(len(flag))])
        least = float(np.rint(codes_lost @ first.x))
        second = solve(occurrences, [(codes_lost, least + 0.5)])
        if second.x is not None:
            best = _assignment(second.x[:n_x], edges, members, slots, capacity) or best
    return best, best is not None and first.status == 0


def _assignment(x: np.ndarray, edges: list[tuple[int, int, frozenset[str]]],
                members: list[list[int]], slots: list[int], capacity: list[int]
                ) -> dict[int, int] | None:
    """Rows to slots from a solution's counts, or None unless it is complete (rows once,
    every slot full): rounding must not let a wrong assignment through."""
    counts = np.rint(x).astype(np.int64).tolist()
    found: dict[int, int] = {}
    taken = [0] * len(members)
    for (g, s, _), q in zip(edges, counts, strict=True):
        if q < 0 or taken[g] + q > len(members[g]):
            return None
        found.update((r, s) for r in members[g][taken[g]:taken[g] + q])
        taken[g] += q
    filled: Counter[int] = Counter(found.values())
    return found if all(filled[s] == capacity[s] for s in slots) else None
