"""lda.json publishes no figure measured on the original data.

ILM and ALM are means over patients of a loss divided by each patient's *original*
trajectory length, which the release hides (alignment drops pairs): a figure of the original
data the k-anonymity model does not cover. And the verifier could only accept them within a
tolerance (the algorithm sums floats, it sums exact fractions), which left the low bits of
two doubles — some 46 bits — free for a writer to fill. They stay in the utility report.
"""

from __future__ import annotations

import json

import pytest

from ehr_release import registry
from ehr_release.model.dataset import Dataset
from ehr_release.release.verification import anonymize_as_released, as_released, verify_and_attack
from ehr_release.samples.sample import generate_sample

META = "lda.json"
RELEASE_ID = "rel-loss"


@pytest.fixture(scope="module")
def release() -> tuple[dict[str, bytes], Dataset, dict]:
    sample = generate_sample(60, seed=3, longitudinal=True)
    entry = registry.get("lda")
    params = entry.parse({"k": "3"})
    files = anonymize_as_released(entry, sample, params, None, RELEASE_ID)
    return files, sample, params


def _holds(files: dict[str, bytes], sample: Dataset, params: dict) -> bool:
    """The release flow's own check: closed world, model, identifiers, attack audit."""
    report, _ = verify_and_attack(registry.get("lda"), files, sample, params, RELEASE_ID)
    return report.holds


def _utility(files: dict[str, bytes], sample: Dataset, params: dict) -> dict[str, float]:
    entry = registry.get("lda")
    return entry.evaluate(files, as_released(entry, sample, RELEASE_ID), params, None).metrics


def test_the_release_states_no_loss(release) -> None:
    files, sample, params = release
    assert _holds(files, sample, params)
    assert not {"ilm", "alm"} & set(json.loads(files[META]))
    assert {"ILM", "ALM"} <= set(_utility(files, sample, params))


def test_a_loss_carrying_bits_in_its_last_digits_is_refused(release) -> None:
    files, sample, params = release
    utility = _utility(files, sample, params)
    meta = json.loads(files[META])
    planted = {**meta, "ilm": utility["ILM"] + 4e-10, "alm": utility["ALM"] - 7e-10}
    text = json.dumps(planted, indent=2, sort_keys=True) + "\n"
    assert not _holds({**files, META: text.encode()}, sample, params)
