"""Release-specific pseudonyms for the patient ids a release carries.

GCCens and LDA publish one record per patient under a ``patient_id``. The id in the
hospital's extract is usually a medical record number — a direct identifier that any other
data set keyed by it would re-identify, whatever the anonymization did to the codes. So a
release never carries it: each id becomes ``HMAC-SHA256(site key, release id ‖ patient id)``,
truncated to 80 bits. Keyed by the release id, the same patient gets unrelated pseudonyms in
two releases (researchers cannot join them); keyed by a site secret, nobody without the key
can recompute the mapping from a list of MRNs. The steward can (to re-verify a release, or to
re-contact under an IRB protocol), because the key stays on the site.

The key is ``EHR_RELEASE_PSEUDONYM_KEY`` (hex, ≥ 32 bytes) when set — what a deployment whose
workers run on several machines must use — otherwise ``pseudonym.key`` in the working folder,
created with fresh OS randomness on first use and readable by its owner only. Losing it does
not expose anything; it only means old releases can no longer be matched to source ids.
Key loading is shared with the audit key (:mod:`ehr_release.storage.site_keys`).

Records are re-ordered by pseudonym, so the order of lines does not leak the order of the
extract (often admission order or MRN order).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable

from ehr_release.core.errors import EhrReleaseError
from ehr_release.model.dataset import PATIENT_ID, Dataset
from ehr_release.storage.site_keys import load_key

KEY_ENV = "EHR_RELEASE_PSEUDONYM_KEY"
KEY_FILE = "pseudonym.key"
PSEUDONYM_HEX = 20  # 80 bits: a collision among 10^6 patients has probability ~4e-13

Pseudonym = Callable[[str], str]


def site_key() -> bytes:
    """The site's pseudonym key (environment first, else the working folder's key file)."""
    key = load_key(KEY_ENV, KEY_FILE, "pseudonym key")
    assert key is not None  # created on first use
    return key


def pseudonymizer(release_id: str, key: bytes | None = None) -> Pseudonym:
    """The id → pseudonym function of one release."""
    secret = site_key() if key is None else key
    prefix = release_id.encode() + b"\0"

    def pseudonym(patient_id: str) -> str:
        digest = hmac.new(secret, prefix + str(patient_id).encode(), hashlib.sha256)
        return "R" + digest.hexdigest()[:PSEUDONYM_HEX]

    return pseudonym


def _mapping(ids: list[str], pseudonym: Pseudonym) -> dict[str, str]:
    mapping = {pid: pseudonym(pid) for pid in ids}
    if len(set(mapping.values())) != len(mapping):  # 2^-80 per pair; refuse, never merge
        raise EhrReleaseError("two patients received the same pseudonym; re-run the release "
                              "under a new run id")
    return mapping


def pseudonymize_dataset(dataset: Dataset, pseudonym: Pseudonym) -> Dataset:
    """The same data under the release's pseudonyms (what the verifier compares against)."""
    mapping = _mapping(dataset.patient_ids, pseudonym)
    patients = dataset.patients.rename(index=mapping)
    patients.index.name = dataset.patients.index.name
    diagnoses = dataset.diagnoses.assign(**{PATIENT_ID: dataset.diagnoses[PATIENT_ID]
                                            .map(mapping)})
    return Dataset(patients, diagnoses, class_column=dataset.class_column, source=dataset.source,
                   code_system=dataset.code_system)


def pseudonymize_records(data: bytes, pseudonym: Pseudonym) -> bytes:
    """Rewrite the ``patient_id`` of every JSON Lines record; order the lines by pseudonym."""
    records = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    mapping = _mapping([str(r[PATIENT_ID]) for r in records], pseudonym)
    for record in records:
        record[PATIENT_ID] = mapping[str(record[PATIENT_ID])]
    records.sort(key=lambda r: r[PATIENT_ID])
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
