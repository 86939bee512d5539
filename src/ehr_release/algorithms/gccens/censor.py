"""The GCCens loop: cap every code, then censor greedily until the sample is k-mapped.

Decisions of the spec kept here (``03-repeated-longitudinal.md`` §1):

* codes whose cap is 0 are never candidates (choosing one would remove nothing, forever);
* caps are clamped to the largest count still present, c_d = min(c_d, max count in Y), so
  the chosen code always has records to censor and every step removes ≥ 1 instance;
* ties between codes go to the lowest code (string order), which makes runs reproducible.

Why it terminates: each step lowers one cap by one; when every cap is 0 all records are
empty and dis(∅) = |P| ≥ k (checked up front).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ehr_release.algorithms.gccens.index import Multiset, PopulationIndex
from ehr_release.core.errors import ParameterError

#: Key of a caps mapping that applies to every code not listed by name.
DEFAULT_CAP = "*"


@dataclass(frozen=True)
class CensoringResult:
    """What GCCens produced and the caps it ended with.

    ``capped`` is the sample after step 1 (clamped to the initial caps), the denominator of
    CUL; ``released`` the k-mapped records, in sample order; ``steps`` the censored code and
    how many records lost one instance of it, in order. ``policy`` is the caps as the owner
    declared them (code or ``"*"`` → cap; empty for 'max'): the only caps a release may
    publish. ``initial_caps`` and ``final_caps`` name every code of the sample and, for
    unlisted codes, its largest count there — derived from the sample, so never published
    (an attacker holding the population would learn who is in the sample).
    """

    released: list[dict[str, int]]
    capped: list[dict[str, int]]
    initial_caps: dict[str, int]
    final_caps: dict[str, int]
    steps: list[tuple[str, int]] = field(default_factory=list)
    policy: dict[str, int] = field(default_factory=dict)


def resolve_caps(sample: Sequence[Multiset], caps: Mapping[str, int]) -> dict[str, int]:
    """The cap of every code of the sample and of every code listed in ``caps``.

    A code listed in ``caps`` gets that cap; otherwise the ``"*"`` entry if given; otherwise
    the most instances of the code in any sample record (the thesis' automatic choice). That
    last cap changes no record — it is "no cap" — which is why a release states the policy
    ('max' = uncapped) and never these sample-derived numbers.

    Raises
    ------
    ParameterError
        If a cap is negative or not an integer.
    """
    for code, cap in caps.items():
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise ParameterError("caps", f"must give integer caps ≥ 0 (code {code})", cap)
    seen: dict[str, int] = {}
    for record in sample:
        for code, n in record.items():
            seen[code] = max(seen.get(code, 0), n)
    for code in caps:
        seen.setdefault(code, 0)
    seen.pop(DEFAULT_CAP, None)
    return {code: caps.get(code, caps.get(DEFAULT_CAP, top)) for code, top in sorted(seen.items())}


def gccens(sample: Sequence[Multiset], population: PopulationIndex | Sequence[Multiset],
           k: int, caps: Mapping[str, int]) -> CensoringResult:
    """Censor ``sample`` so that every record has dis ≥ ``k`` against ``population``.

    Parameters
    ----------
    sample
        The records to release: code → count (counts > 0).
    population
        The population the sample is mapped against, or a prebuilt index of it.
    k
        Each released record must be contained in at least k population records.
    caps
        Per-code caps, ``"*"`` for all unlisted codes; see :func:`resolve_caps`.

    Returns
    -------
    CensoringResult

    Raises
    ------
    ParameterError
        If ``k`` < 1, ``k`` exceeds the population size, or a cap is negative.

    Examples
    --------
    >>> pop = [{"250": 2}, {"250": 1}, {"272": 1}]
    >>> gccens([{"250": 2}], pop, 2, {"250": 2}).released
    [{'250': 1}]
    """
    index = population if isinstance(population, PopulationIndex) else \
        PopulationIndex(population)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ParameterError("k", "must be an integer ≥ 1", k)
    if k > index.size:
        raise ParameterError("k", f"must not exceed the population size ({index.size})", k)
    initial = resolve_caps(sample, caps)
    capped = [{c: min(n, initial[c]) for c, n in sorted(r.items()) if min(n, initial[c]) > 0}
              for r in sample]
    records = [dict(r) for r in capped]
    # at[code][count] = records holding the code exactly count times (the r_d of the thesis)
    at: dict[str, dict[int, set[int]]] = {}
    for i, record in enumerate(records):
        for code, n in record.items():
            at.setdefault(code, {}).setdefault(n, set()).add(i)
    cap = {code: max(at[code]) if code in at else 0 for code in initial}  # clamp
    violators = {i for i, r in enumerate(records) if index.dis(r) < k}
    steps: list[tuple[str, int]] = []
    while violators:
        code = min((c for c in sorted(cap) if cap[c] >= 1), key=lambda c: len(at[c][cap[c]]))
        chosen = at[code].pop(cap[code])
        for i in chosen:
            records[i][code] -= 1
            if records[i][code] == 0:
                del records[i][code]
        if cap[code] > 1:
            at[code].setdefault(cap[code] - 1, set()).update(chosen)
        cap[code] -= 1  # bucket cap-1 is now non-empty: the clamp holds without a scan
        steps.append((code, len(chosen)))
        for i in chosen & violators:
            if index.dis(records[i]) >= k:
                violators.discard(i)
    return CensoringResult(released=records, capped=capped, initial_caps=initial,
                           final_caps=cap, steps=steps, policy=dict(sorted(caps.items())))
