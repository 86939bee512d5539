"""A release request, resolved once into what every stage needs: the ``ReleasePlan``.

Why: before the plan, each stage got a run id and strings and rebuilt the rest — parameters
parsed up to seven times per release, configuration files re-read behind caches keyed on
their modification time. Now the ingest stage makes the plan once (typed parameters with
their defaults, the dataset and its fingerprint, and a fingerprint of every other file the
parameters name) and the flow hands the same object to every task.

The plan also fixes what a cached stage may be reused for: its key covers the content of
every input file, so a configuration edited between a crash and ``resume`` is not served
the anonymization made with the old one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ehr_release.core.files import sha256_file
from ehr_release.core.randomness import check_random_state
from ehr_release.parameters.params import SEED
from ehr_release.planning.request import ReleaseRequest

if TYPE_CHECKING:
    import numpy as np

    from ehr_release.model.dataset import Dataset
    from ehr_release.registry import AlgorithmEntry


@dataclass(frozen=True, eq=False)
class ReleasePlan:
    """One release run, resolved: the request, its entry, typed parameters and inputs.

    ``params`` are the entry's parsed parameters (defaults applied, types checked);
    ``inputs`` maps each file a parameter names (configuration, constraints, taxonomies,
    population, policy) to the SHA-256 of its content; ``prepared`` holds those the entry
    loads once for every stage (:attr:`~ehr_release.registry.AlgorithmEntry.prepare`).
    """

    request: ReleaseRequest
    entry: AlgorithmEntry
    params: Mapping[str, Any]
    dataset: Dataset
    fingerprint: str
    inputs: Mapping[str, str]
    prepared: Mapping[str, Any]

    @property
    def run_id(self) -> str:
        return self.request.run_id

    @property
    def algorithm(self) -> str:
        return self.request.algorithm

    def stage_params(self) -> dict[str, Any]:
        """What a stage hands the entry: the parameters plus the inputs loaded once."""
        from ehr_release.parameters.prepared import PREPARED

        return {**self.params, PREPARED: self.prepared}

    def rng(self) -> np.random.Generator:
        """The run's random stream (:func:`run_stream`)."""
        return run_stream(self.params)

    def cache_material(self) -> dict[str, Any]:
        """What a cached stage's result depends on (see the module docstring)."""
        return {"run_id": self.run_id, "fingerprint": self.fingerprint,
                "algorithm": self.algorithm, "params": dict(self.request.params),
                "inputs": dict(self.inputs)}


def input_files(params: Mapping[str, Any]) -> dict[str, str]:
    """``{parameter: SHA-256}`` for every parameter whose value names an existing file."""
    found: dict[str, str] = {}
    for name, value in sorted(params.items()):
        if isinstance(value, str) and value and "\n" not in value:
            path = Path(value).expanduser()
            if path.is_file():
                found[name] = sha256_file(path)
    return found


def parse_request_params(request: ReleaseRequest) -> tuple[AlgorithmEntry, dict[str, Any]]:
    """The request's entry and typed parameters; loads no anonymizer and no pandas.

    A seed is refused here unless the site is a test site (read from the audit chain, not
    from the environment: :mod:`ehr_release.storage.site`), so neither the CLI, the
    dashboard nor the flow's own ingest stage accepts a seeded release on a real site.
    """
    from ehr_release.registry import get as get_algorithm

    entry = get_algorithm(request.algorithm)
    params = entry.parse(request.params)
    if params.get(SEED) is not None:
        from ehr_release.storage.site import refuse_seed_unless_test_site

        refuse_seed_unless_test_site(params)
    return entry, params


def make_plan(request: ReleaseRequest, dataset: Dataset | None = None, *,
              parsed: tuple[AlgorithmEntry, dict[str, Any]] | None = None,
              fingerprint: str | None = None) -> ReleasePlan:
    """Resolve ``request``: parse its parameters (unless ``parsed`` holds them), read its
    input (unless ``dataset`` is the input already read, and ``fingerprint`` its
    fingerprint if the process that read it computed that too), fingerprint everything.
    Raises the first bad parameter or input."""
    entry, params = parsed or parse_request_params(request)
    if dataset is None:
        from ehr_release.planning.intake import load_request_dataset

        dataset, fingerprint = load_request_dataset(request), None
    return ReleasePlan(request=request, entry=entry, params=params, dataset=dataset,
                       fingerprint=fingerprint or dataset.fingerprint(),
                       inputs=input_files(params),
                       prepared=entry.prepare(params) if entry.prepare else {})


def run_stream(params: Mapping[str, Any]) -> np.random.Generator:
    """A run's random stream from its parsed parameters: the seed parameter (test mode
    only), else OS entropy. The flow's second process makes the evaluation's stream with it
    too, so a seeded stream it derives work from ahead is the one the flow hands over."""
    seed = params.get(SEED)
    return check_random_state(None if seed is None else int(seed))

