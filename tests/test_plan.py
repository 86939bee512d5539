"""The ReleasePlan: made once, it carries typed parameters and the inputs they name, loaded
once for every stage (issue 17: no stage re-reads a configuration or a population)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ehr_release.model.dataset import Dataset
from ehr_release.parameters.prepared import PREPARED
from ehr_release.planning.plan import make_plan
from ehr_release.planning.request import ReleaseRequest
from ehr_release.samples.sample import generate_sample, write_sample


def test_the_population_is_read_once_for_all_stages(tmp_path: Path, monkeypatch) -> None:
    from ehr_release.ingest import population as population_input

    population = generate_sample(200, seed=4)
    write_sample(population, tmp_path / "population.csv")
    keep = set(population.patient_ids[:80])
    d = population.diagnoses
    sample = Dataset(population.patients.loc[sorted(keep)],
                     d[d["patient_id"].isin(keep)].reset_index(drop=True), source="sample")
    reads: list[str] = []
    real = population_input.load_population
    monkeypatch.setattr(population_input, "load_population",
                        lambda p: reads.append(p) or real(p))
    request = ReleaseRequest(run_id="rel-" + "a" * 32, input_path="unused.csv",
                             algorithm="gccens", requester="steward", out_dir=str(tmp_path),
                             params={"k": "2", "population": str(tmp_path / "population.csv")})
    plan = make_plan(request, sample)
    assert len(reads) == 1 and plan.inputs["population"]  # loaded and fingerprinted
    entry, params = plan.entry, plan.stage_params()
    files = entry.anonymize(plan.dataset, params, np.random.default_rng(0))
    assert entry.verify(files, plan.dataset, params).holds
    assert entry.attack is not None and entry.attack(files, plan.dataset, params).passed
    entry.evaluate(files, plan.dataset, params, np.random.default_rng(0))
    assert len(reads) == 1  # no stage read it again
    entry.verify(files, plan.dataset, entry.parse(request.params))  # outside a plan: reads
    assert len(reads) == 2


def test_the_plan_shows_parameters_without_the_loaded_inputs(tmp_path: Path) -> None:
    """What a certificate prints is the parameters; the loaded objects travel apart."""
    config = Path(__file__).resolve().parents[1] / "examples" / "artuc-mimic" / "config.yaml"
    request = ReleaseRequest(run_id="rel-" + "b" * 32, input_path="unused.csv",
                             algorithm="artuc", requester="steward", out_dir=str(tmp_path),
                             params={"k": "2", "config": str(config)})
    sample = generate_sample(60, seed=2)
    plan = make_plan(request, sample)
    assert PREPARED not in plan.params
    assert set(plan.stage_params()[PREPARED]) == {"config"}
