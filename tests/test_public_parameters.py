"""Published parameters: no test seed, and site files by their file name only."""

from __future__ import annotations

from ehr_release import registry
from ehr_release.documents.datasheet import public_parameters


def test_site_paths_keep_their_file_name_and_the_seed_goes() -> None:
    params = {"config": "/home/steward/oncology-2026/config.yaml", "k": 5, "seed": 3,
              "taxonomies": "adult"}
    assert public_parameters(params, {"config", "taxonomies"}) == {
        "config": "config.yaml", "k": 5, "taxonomies": "adult"}
    assert public_parameters(params) == {"config": params["config"], "k": 5,
                                         "taxonomies": "adult"}


def test_every_parameter_naming_a_site_file_is_marked() -> None:
    """ArtUC's configuration, GCCens's population and DiffGen's taxonomy file."""
    marked = {name: registry.get(name).site_paths
              for name in ("artuc", "artuc-baseline", "rmr", "gccens", "diffgen")}
    assert marked["artuc"] == marked["artuc-baseline"] == marked["rmr"] == {"config"}
    assert marked["gccens"] == {"population"}
    assert marked["diffgen"] == {"taxonomies"}


def test_a_diffgen_configuration_file_is_published_by_its_file_name(tmp_path) -> None:
    """cut.json restates the configuration it was cut with: a site file appears there by
    its file name, and the release still verifies."""
    import json
    import shutil
    from pathlib import Path

    import numpy as np

    import ehr_release.configuration.taxonomies as taxonomies
    from ehr_release.samples.sample import generate_sample

    folder = tmp_path / "home" / "steward" / "oncology-cohort-2026"
    folder.mkdir(parents=True)
    site_file = folder / "mimic-taxonomies.yaml"
    shutil.copy(Path(taxonomies.__file__).with_name("mimic-demo.yaml"), site_file)
    entry = registry.get("diffgen")
    params = entry.parse({"epsilon": "1", "h": "2", "taxonomies": str(site_file),
                          "predictors": "age,gender,insurance,codes", "eval_runs": "0",
                          "seed": "5"})
    data = generate_sample(300, seed=5)
    files = entry.anonymize(data, params, np.random.default_rng(5))
    assert json.loads(files["cut.json"])["configuration"] == "mimic-taxonomies.yaml"
    assert b"oncology-cohort-2026" not in b"".join(files.values())
    assert entry.verify(files, data, params).holds
