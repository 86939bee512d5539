"""Algorithms by name: each module of this package registers one entry.

An entry ties together three independent pieces: the anonymizer (``algorithms/``), the
verifier that re-checks its guarantee with separate code (``privacy/``), and the utility
evaluation (``utility/``). The flow only ever looks algorithms up here, so a new algorithm
plugs in by adding a module with an ``ENTRY`` — the flow does not change.

Release files travel as ``dict[str, bytes]`` (file name → content): exactly what gets
published, so the verifier checks the bytes a researcher will receive.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from ehr_release.core.errors import ParameterError
from ehr_release.model.reports import AttackReport, UtilityReport, VerificationReport
from ehr_release.parameters.params import Param, did_you_mean, parse_params
from ehr_release.privacy.closed_world import ReleaseSchema

if TYPE_CHECKING:  # annotations only: the CLI checks parameters before pandas loads
    import numpy as np

    from ehr_release.model.dataset import Dataset

ReleaseFiles = dict[str, bytes]

def lazy(module: str, name: str, /, **bound: Any) -> Callable[..., Any]:
    """``module.name``, imported at its first call, with ``bound`` keyword arguments.

    Entries name their verifier, attack and evaluation this way: every family's entry points
    have the one signature (``verify(files, original, params)``,
    ``attack(files, original, params)``, ``evaluate(files, original, params, rng)``), so the
    registry wires them without a wrapper, and without loading them (the CLI checks
    parameters before pandas would load).
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **bound, **kwargs)

    call.__name__ = name
    call.__qualname__ = f"{module}.{name}"
    call.lazy_module = module  # type: ignore[attr-defined]  # see AlgorithmEntry.stage_modules
    return call


@dataclass(frozen=True)
class AlgorithmEntry:
    """Everything the flow needs to run, verify and evaluate one algorithm.

    ``anonymize(dataset, params, rng)`` returns the release files;
    ``verify(files, original, params)`` re-checks the guarantee from the files alone;
    ``evaluate(files, original, params, rng)`` measures utility.
    ``privacy_model`` is a one-line statement of the guarantee for the certificate.
    ``headline_loss`` names the utility metric (lower is better) a comparison ranks by.
    ``id_file`` names the JSON Lines release file whose records carry a ``patient_id``; the
    flow replaces those ids by release-specific pseudonyms
    (:mod:`ehr_release.governance.pseudonyms`).
    ``schema`` is the verifier's closed-world declaration of the release format (every file,
    field and value type; :mod:`ehr_release.privacy.closed_world`): a release departing from
    it fails verification before the model is checked.
    ``attack(files, original, params)`` is the independent attack audit
    (:mod:`ehr_release.privacy.attacks`): the model's adversary run on the published bytes.
    ``count_records(files)`` is how many patient records the release holds: a release with
    none is not publishable unless the request allows an empty release.
    ``differentially_private``: the guarantee is ε-DP, which covers the mechanism only when
    its parameters are chosen without looking at the data. A comparison measures utility on
    the true data, so it may show such an algorithm's rows but never recommends one nor
    releases from one (tuning ε or h on the private data spends budget the ledger does not
    count: spec 04, "Decisions left open by the paper").
    ``prepare(params)`` loads the files the parameters name (a configuration, a population)
    once per release; the plan hands the result to every stage under :data:`PREPARED`, so no
    stage reads them again and no cache is needed.
    ``prepare_evaluation(original, params, rng)`` derives what ``evaluate`` needs of the
    input, the parameters and its random stream alone (never of the release), and keeps it
    for the next evaluation of that very data set with a stream in ``rng``'s state: the
    flow's second process calls it while the flow anonymizes (:mod:`ehr_release.tasks.aside`).
    """

    name: str
    summary: str
    privacy_model: str
    params: tuple[Param, ...]
    anonymize: Callable[[Dataset, dict[str, Any], np.random.Generator], ReleaseFiles]
    verify: Callable[[ReleaseFiles, Dataset, dict[str, Any]], VerificationReport]
    evaluate: Callable[[ReleaseFiles, Dataset, dict[str, Any], np.random.Generator],
                       UtilityReport]
    headline_loss: str | None = None
    id_file: str | None = None
    schema: ReleaseSchema | None = None
    attack: Callable[[ReleaseFiles, Dataset, dict[str, Any]], AttackReport] | None = None
    count_records: Callable[[ReleaseFiles], int] | None = None
    defaults_from: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    prepare: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    prepare_evaluation: Callable[[Dataset, dict[str, Any], np.random.Generator], None] \
        | None = None
    differentially_private: bool = False

    def stage_modules(self) -> list[str]:
        """The modules its :func:`lazy` stages import at their first call: a flow process
        waiting to run can load them beforehand (:mod:`ehr_release.flows.head_start`)."""
        stages = (self.anonymize, self.verify, self.evaluate, self.attack)
        return [m for s in stages if isinstance(m := getattr(s, "lazy_module", None), str)]

    @property
    def site_paths(self) -> frozenset[str]:
        """Parameters that may name a file on the site's machine (published by name only)."""
        return frozenset(p.name for p in self.params if p.site_path)

    def parse(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Validate raw parameters (strings from the CLI or typed values).

        ``defaults_from(given)`` may supply defaults read from a file the parameters name
        (ArtUC's configuration carries the parameters it was written for); a parameter
        given explicitly always wins.
        """
        if self.defaults_from is not None:
            given = {**self.defaults_from(given), **given}
        return parse_params(self.params, given)


@cache
def _entries() -> dict[str, AlgorithmEntry]:
    found: dict[str, AlgorithmEntry] = {}
    for mod in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{mod.name}")
        entry = getattr(module, "ENTRY", None)
        if isinstance(entry, AlgorithmEntry):
            found[entry.name] = entry
    return found


def names() -> list[str]:
    """Names of all registered algorithms, sorted."""
    return sorted(_entries())


def get(name: str) -> AlgorithmEntry:
    """The entry for ``name``; a clear error listing the known names otherwise.

    The module named like the algorithm is tried first, so one algorithm is found without
    importing every other one (the CLI refuses bad input before they would have loaded).
    """
    module_name = name.replace("-", "_")
    built = getattr(_entries, "cache_info", None)  # absent when a test replaced the table
    if (built is not None and built().currsize == 0 and module_name.isidentifier()
            and module_name in {m.name for m in pkgutil.iter_modules(__path__)}):
        entry = getattr(importlib.import_module(f"{__name__}.{module_name}"), "ENTRY", None)
        if isinstance(entry, AlgorithmEntry) and entry.name == name:
            return entry
    try:
        return _entries()[name]
    except KeyError:
        known = names()
        raise ParameterError(
            "algorithm", f"must be one of {', '.join(known) or '(none registered)'}", name,
            message=f"algorithm {name!r} is not registered{did_you_mean(name, known)} "
                    f"(known: {', '.join(known) or 'none'})") from None
