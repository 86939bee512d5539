"""Keyed per-patient hashes that link an extract to earlier ones, whatever its file says.

Two keys per patient, both HMAC-SHA256 under the site's linkage key (never stored with the
hashes, never published), truncated to 128 bits:

* ``ids``: the source's name and the patient's id in it. It links an extract to an earlier
  one of the same source however its columns, rows or other values changed.
* ``contents``: the patient's record — every demographic column as ``name=value`` in name
  order, then the diagnosis codes as a sorted multiset — regardless of the id and the source.
  It links an extract whose ids were relabelled, or that was registered under another source.

A patient of one extract is *linked* to an earlier extract when either key matches one of the
earlier extract's patients. What links and what does not (docs/reliability.md):

* linked: relabelled ids (content), reordered or reordered columns and rows (both), an added
  or dropped column (id), a changed row (id), rows removed or added (the rest by both);
* not linked: a patient whose id *and* record both changed, or whose record changed and who
  is filed under another source; releases made by other systems.

Over-linking is the safe side: two patients with the same record (e.g. the same one code and
no demographics) both count as the earlier one's — their ε adds up and a differencing pair
looks smaller than it is, never larger.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ehr_release.site_keys import load_key

if TYPE_CHECKING:  # pandas only when an extract is hashed: the CLI's refusals stay light
    from ehr_release.dataset import Dataset

KEY_ENV = "EHR_RELEASE_LINKAGE_KEY"
KEY_FILE = "linkage.key"
HASH_BYTES = 16
DEFAULT_SOURCE = "default"


@dataclass(frozen=True, eq=False)
class PatientLinks:
    """One extract's patients as keyed hashes; row ``i`` of both arrays is one patient."""

    ids: np.ndarray  # dtype S16
    contents: np.ndarray  # dtype S16

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.contents):
            raise ValueError("ids and contents must describe the same patients")

    @property
    def patients(self) -> int:
        return len(self.ids)

    def to_bytes(self) -> tuple[bytes, bytes]:
        return self.ids.tobytes(), self.contents.tobytes()

    @classmethod
    def from_bytes(cls, ids: bytes, contents: bytes) -> PatientLinks:
        return cls(np.frombuffer(ids, dtype=f"S{HASH_BYTES}"),
                   np.frombuffer(contents, dtype=f"S{HASH_BYTES}"))



def _keys(hashes: np.ndarray) -> np.ndarray:
    """The first 64 bits of each hash as integers, to sort and search fast.

    Two different patients share them with probability about n²/2⁶⁵ (3·10⁻⁶ among ten
    million); such a collision only over-links, the safe side.
    """
    if not len(hashes):
        return np.zeros(0, dtype="<u8")
    return np.ascontiguousarray(hashes).view("<u8")[::2]


class LinkIndex:
    """One extract's keys in a hash index built once, so meeting a hundred earlier extracts
    costs a hundred lookups of theirs (pandas' hash table: about 7× a binary search's
    speed on 100K random keys), never a sort of either side."""

    def __init__(self, links: PatientLinks) -> None:
        import pandas as pd

        self.patients = links.patients
        ids, self._id_of = np.unique(_keys(links.ids), return_inverse=True)
        contents, self._content_of = np.unique(_keys(links.contents), return_inverse=True)
        self._ids, self._contents = pd.Index(ids), pd.Index(contents)

    def meet(self, earlier: PatientLinks) -> tuple[np.ndarray, int]:
        """(a boolean per patient of this extract: linked to ``earlier``; how many of
        ``earlier``'s patients are linked to this extract)."""
        id_at = self._ids.get_indexer(_keys(earlier.ids))
        content_at = self._contents.get_indexer(_keys(earlier.contents))
        id_hit, content_hit = id_at >= 0, content_at >= 0
        by_id = np.zeros(len(self._ids), dtype=bool)
        by_id[id_at[id_hit]] = True
        by_content = np.zeros(len(self._contents), dtype=bool)
        by_content[content_at[content_hit]] = True
        linked = by_id[self._id_of] | by_content[self._content_of]
        return linked, int((id_hit | content_hit).sum())

    def overlap(self, earlier: PatientLinks) -> Overlap:
        linked, matched = self.meet(earlier)
        shared = int(linked.sum())
        return Overlap(shared, self.patients - shared, earlier.patients - matched)


@dataclass(frozen=True)
class Overlap:
    """How two extracts' patient sets meet (counts only)."""

    shared: int  # patients of the current extract linked to the earlier one
    only_current: int  # patients of the current extract not linked to the earlier one
    only_earlier: int  # patients of the earlier extract linked to no current patient

    @property
    def disjoint(self) -> bool:
        return self.shared == 0

    @property
    def identical(self) -> bool:
        return self.only_current == 0 and self.only_earlier == 0 and self.shared > 0


def overlap(current: PatientLinks, earlier: PatientLinks) -> Overlap:
    """The overlap of ``current`` with ``earlier``, each side matched by either key."""
    return LinkIndex(current).overlap(earlier)


def linkage_key() -> bytes:
    """The site's linkage key (``EHR_RELEASE_LINKAGE_KEY``, else ``linkage.key`` in the home)."""
    key = load_key(KEY_ENV, KEY_FILE, "linkage key")
    assert key is not None  # created on first use
    return key


def link_patients(dataset: Dataset, source: str, key: bytes | None = None) -> PatientLinks:
    """The keyed hashes of ``dataset``'s patients, in its ``patients`` order."""
    key = linkage_key() if key is None else key
    ids = [str(i) for i in dataset.patients.index]
    records = _records(dataset)
    id_prefix = b"ehr_release.link.id\0" + source.encode() + b"\0"
    id_hashes = [_mac(key, id_prefix + i.encode()) for i in ids]
    content_hashes = [_mac(key, b"ehr_release.link.content\0" + r.encode()) for r in records]
    return PatientLinks(np.array(id_hashes, dtype=f"S{HASH_BYTES}"),
                        np.array(content_hashes, dtype=f"S{HASH_BYTES}"))


def _mac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()[:HASH_BYTES]


def _records(dataset: Dataset) -> list[str]:
    """Each patient's canonical record text: ids and column order play no part."""
    import pandas as pd

    from ehr_release.dataset import CODE, PATIENT_ID

    patients = dataset.patients
    text = pd.Series("", index=patients.index, dtype=object)
    for column in sorted(patients.columns, key=str):
        values = patients[column].astype(object).where(patients[column].notna(), "")
        text = text + f"{column}=" + values.astype(str) + "\x1f"
    diagnoses = dataset.diagnoses.sort_values([PATIENT_ID, CODE], kind="stable")
    codes = diagnoses.groupby(PATIENT_ID, sort=False)[CODE].agg(",".join)
    codes = codes.reindex(patients.index).fillna("")
    return (text + "codes=" + codes.astype(str)).tolist()
