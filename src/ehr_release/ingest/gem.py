"""ICD-9-CM → ICD-10-CM by the CMS General Equivalence Mappings, only when a request asks.

An extract that mixes the two code systems (MIMIC-IV holds both: US coding changed in
October 2015) is refused unless the request sets ``code_mapping: gem``. With it, every
ICD-9-CM code becomes one ICD-10-CM node or none, by fixed rules — the steward makes no
choice, so two runs on one extract map it the same way:

1. **Which codes are ICD-9-CM.** MIMIC-IV says so per row (``icd_version``). A CSV, OMOP or
   MIMIC-III extract does not, so its codes decide: an extract every code of which is an
   ICD-9-CM node is ICD-9-CM throughout (the reading without the option too), one with no
   ICD-9-only code is ICD-10-CM throughout (nothing is mapped); in a mixed one a code that
   is a node of ICD-9-CM only is mapped and the rest are ICD-10-CM — ``V01`` or ``E849``,
   nodes of both, are then read as ICD-10-CM (declare the rows' version through MIMIC-IV's
   layout when that matters).
2. **Its GEM targets.** The rows of the CMS forward GEM
   (``data/gem_icd9_to_icd10cm.csv.gz``, provenance in ``data/gem_provenance.txt``) for the
   code, or for every GEM code under it when the code is a category such as ``250`` (GEM
   rows are leaf codes). A target retired or split since the GEM was made becomes its
   nearest ancestor in the packaged ICD-10-CM edition (one character dropped at a time).
3. **One-to-one**: one distinct target → that code.
4. **One-to-many** (alternatives, or the parts of a *combination* entry, over all
   scenarios and choice lists): the deepest ICD-10-CM node that is an ancestor-or-self of
   every target — it claims only what all of them share (``250.50`` → ``E11.3``, "type 2
   diabetes with ophthalmic complications"), never one alternative picked among several —
   provided it is a code: a category (``E11``) or below.
5. **Unmapped**: a "no map" GEM row, or targets that share no category (their common
   ancestor is a block such as ``E08-E13``, a chapter or the root: no ICD-10-CM code holds
   them all, and no hospital records a block as a diagnosis); the diagnosis is dropped.

The counts of 4 and 5 (distinct codes and the diagnoses carrying them) travel with the
dataset (:class:`MappingLosses`) to the internal certificate. They are exact statistics of
the true data, so the datasheet — the recipient's copy — states the rule only.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

#: The one mapping a request can name (``ReleaseRequest.code_mapping``).
GEM = "gem"
GEM_FILE = "gem_icd9_to_icd10cm.csv.gz"
#: How the datasheet and the certificate name the mapping (data-independent words).
GEM_WORDS = ("ICD-9-CM codes mapped to ICD-10-CM with the CMS General Equivalence Mappings "
             "(one target: that code; several: their deepest common ICD-10-CM ancestor "
             "when it is a category or below; no map, or no category shared: diagnosis "
             "dropped)")
#: The level of ICD-10-CM categories (``E11``): a mapped code is never above it.
CATEGORY = 3
#: Outcomes of :func:`map_icd9`.
ONE_TO_ONE, ONE_TO_MANY, UNMAPPED = "one-to-one", "one-to-many", "unmapped"


@dataclass(frozen=True)
class MappingLosses:
    """What the GEM mapping of one extract cost: counts only, never a code.

    ``*_codes`` count distinct ICD-9-CM codes, ``*_diagnoses`` the diagnosis rows that
    carried them (dropped ones for unmapped, generalized ones for one-to-many).
    """

    mapped_codes: int = 0
    mapped_diagnoses: int = 0
    one_to_many_codes: int = 0
    one_to_many_diagnoses: int = 0
    unmapped_codes: int = 0
    unmapped_diagnoses: int = 0

    def words(self) -> str:
        """The losses in one line for the certificate (counts, no code)."""
        return (f"{self.mapped_codes} distinct ICD-9-CM codes ({self.mapped_diagnoses} "
                f"diagnoses) mapped: {self.one_to_many_codes} codes "
                f"({self.one_to_many_diagnoses} diagnoses) through a one-to-many choice "
                f"(generalized to the common ancestor of its targets), {self.unmapped_codes} "
                f"codes ({self.unmapped_diagnoses} diagnoses) unmapped and dropped")

    def as_schema(self) -> str:
        """The stored form (a value of the dataset's schema, ``key=count;…``)."""
        return ";".join(f"{k}={v}" for k, v in vars(self).items())

    @classmethod
    def from_schema(cls, text: str) -> MappingLosses:
        pairs = (part.split("=", 1) for part in text.split(";") if part)
        return cls(**{k: int(v) for k, v in pairs})


@cache
def gem_targets() -> dict[str, tuple[str, ...]]:
    """ICD-9-CM code → its GEM targets as ICD-10-CM nodes of the packaged edition (empty
    for a "no map" row), loaded once per process."""
    path = resources.files("ehr_release") / "data" / GEM_FILE
    with resources.as_file(path) as p:
        text = gzip.decompress(p.read_bytes()).decode("utf-8")
    out: dict[str, list[str]] = {}
    for row in csv.DictReader(io.StringIO(text, newline="")):
        targets = out.setdefault(row["icd9"], [])
        if row["icd10"]:
            targets.append(_present(row["icd10"]))
    return {k: tuple(dict.fromkeys(v)) for k, v in out.items()}


def _present(code: str) -> str:
    """``code``, or its nearest ancestor the packaged ICD-10-CM edition holds."""
    from ehr_release.model.hierarchy import code_hierarchy

    h = code_hierarchy("icd10")
    while code not in h:
        code = code[:-1].rstrip(".X") if len(code) > 3 else code[:-1]
        if not code:
            return h.root
    return code


def map_icd9(code: str) -> tuple[str | None, str]:
    """The ICD-10-CM node the dotted ICD-9-CM ``code`` maps to, with the outcome
    (:data:`ONE_TO_ONE`, :data:`ONE_TO_MANY` or :data:`UNMAPPED`; see the module rules)."""
    from ehr_release.model.hierarchy import code_hierarchy

    table = gem_targets()
    sources = [code] if code in table else code_hierarchy("icd9").leaves_under(code)
    if any(not table.get(s) for s in sources):  # a "no map" row under it
        return None, UNMAPPED
    targets = list(dict.fromkeys(t for s in sources for t in table[s]))
    if not targets:
        return None, UNMAPPED
    if len(targets) == 1:
        return targets[0], ONE_TO_ONE
    common = common_ancestor(targets)
    return (None, UNMAPPED) if common is None else (common, ONE_TO_MANY)


def common_ancestor(codes: Sequence[str]) -> str | None:
    """The deepest ICD-10-CM node that is an ancestor-or-self of every code; None when it is
    above the categories (a block, a chapter, the root: the codes share no category)."""
    from ehr_release.model.hierarchy import code_hierarchy

    h = code_hierarchy("icd10")
    common = h.common_ancestor(codes)
    return common if h.level[common] >= CATEGORY else None


def map_codes(icd9_codes: Iterable[str], counts: dict[str, int]
              ) -> tuple[dict[str, str | None], MappingLosses]:
    """Map distinct dotted ICD-9-CM codes; ``counts`` gives each code's diagnosis rows.

    Returns code → ICD-10-CM node (None: dropped) and the losses of this extract.
    """
    mapping: dict[str, str | None] = {}
    tally = {ONE_TO_ONE: [0, 0], ONE_TO_MANY: [0, 0], UNMAPPED: [0, 0]}
    for code in icd9_codes:
        mapping[code], outcome = map_icd9(code)
        tally[outcome][0] += 1
        tally[outcome][1] += counts.get(code, 0)
    return mapping, MappingLosses(
        mapped_codes=sum(t[0] for t in tally.values()),
        mapped_diagnoses=sum(t[1] for t in tally.values()),
        one_to_many_codes=tally[ONE_TO_MANY][0], one_to_many_diagnoses=tally[ONE_TO_MANY][1],
        unmapped_codes=tally[UNMAPPED][0], unmapped_diagnoses=tally[UNMAPPED][1])
