"""A seeded DiffGen release (test mode only) says in its own bytes and its guarantee that
it is not private: anyone with the seed replays every draw and subtracts the noise.

Before: the ledger did not name its sampler and the datasheet (which drops the seed, rightly)
printed the ε-DP guarantee for a seeded run exactly as for a production one.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np

from ehr_release.algorithms.diffgen import (
    DiffGenParams,
    OpenDPNoise,
    encode_dataset,
    noise_source,
    run_diffgen,
)
from ehr_release.algorithms.diffgen.release import release_files
from ehr_release.configuration.taxonomies import load_config
from ehr_release.documents.datasheet import DatasheetContext
from ehr_release.documents.plain import guarantee_sentence
from ehr_release.planning.request import DataUse
from tests.test_diffgen_table1 import table1_config_path, table1_dataset

PARAMS = DiffGenParams(Fraction(1), 2)


def _ledger(tmp_path, noise) -> dict:
    config = load_config(str(table1_config_path(tmp_path)))
    result = run_diffgen(encode_dataset(table1_dataset(), config), PARAMS, noise)
    return json.loads(release_files(result, config, PARAMS)["ledger.json"])


def test_the_ledger_names_its_sampler(tmp_path):
    assert _ledger(tmp_path, OpenDPNoise())["noise"] == "opendp"
    seeded = _ledger(tmp_path, noise_source(3, np.random.default_rng(3)))
    assert seeded["noise"] == "seeded-numpy (test mode)"


def test_a_seeded_dp_guarantee_says_it_is_not_private():
    model = "ε-differential privacy"
    plain = guarantee_sentence("diffgen", model, {"epsilon": 1.0})
    seeded = guarantee_sentence("diffgen", model, {"epsilon": 1.0, "seed": 3})
    assert "Differential privacy with ε = 1" in plain and "NOT" not in plain
    assert seeded.startswith("NOT differentially private")


def test_the_datasheet_of_a_seeded_run_says_so_without_the_seed():
    sheet = DatasheetContext(
        run_id="rel-1", algorithm="diffgen", privacy_model="ε-DP",
        parameters={"epsilon": 1.0, "h": 2}, files=[], records=None, checks_passed=[],
        attacker_model=None, data_use=DataUse(), approved_at=None, audit_head="0" * 64,
        seeded=True)
    assert sheet.guarantee.startswith("NOT differentially private")
    assert "seed" not in sheet.parameters
