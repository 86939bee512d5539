"""GCCens: Greedy Code Censoring, k-map for repeated diagnosis codes.

A sample S of patients (multisets of codes) is released against the identified population
P it was drawn from. Every released record must be contained (as a multiset) in at least k
population records, so an attacker holding P cannot narrow a released record down to fewer
than k people. GCCens only ever removes code instances: first down to per-code caps, then
greedily, one code at a time, from the records holding it at the cap.

See ``../shared/spec/03-repeated-longitudinal.md`` §1 and the thesis, chapter III.
"""

from ehr_release.algorithms.gccens.censor import CensoringResult, gccens, resolve_caps
from ehr_release.algorithms.gccens.index import PopulationIndex

__all__ = ["CensoringResult", "PopulationIndex", "gccens", "resolve_caps"]
