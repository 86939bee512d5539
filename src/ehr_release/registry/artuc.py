"""Registry glue for ``artuc``: parameters, configuration files, release files.

The configuration (attributes, hierarchies, numerical domains, utility constraints) is a
YAML file named by the ``config`` parameter (read by
:func:`ehr_release.configuration.constraints.config_from_params`, once per release: every
stage takes it from the plan). The comparators ``artuc-baseline`` and ``rmr`` reuse these
parameters and helpers. The verifier and the attack are the (k, k^m) family's shared entry
points (:mod:`ehr_release.privacy.kkm`, :mod:`ehr_release.privacy.attacks.kkm`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ehr_release.configuration.epsilon import EPSILON_PATTERN, EPSILON_RULE, resolve_epsilon
from ehr_release.configuration.limits import load_config_yaml, read_config_text
from ehr_release.configuration.relaxation import relax_ceilings
from ehr_release.core.errors import ConfigError
from ehr_release.core.randomness import check_random_state
from ehr_release.model.reports import UtilityReport, VerificationReport
from ehr_release.parameters.params import BOOL_WORDS, Interval, Param, Satisfies
from ehr_release.parameters.prepared import prepared
from ehr_release.privacy.formats.kkm import SCHEMA, count_records
from ehr_release.registry import AlgorithmEntry, ReleaseFiles, lazy

# The anonymizer, configuration reader, verifier, attack and evaluation load pandas; they
# are imported where used, so a request's parameters are checked before any of them loads.
if TYPE_CHECKING:
    import numpy as np

    from ehr_release.algorithms.artuc import Relaxing
    from ehr_release.configuration.constraints import RTConfig
    from ehr_release.model.dataset import Dataset

#: The merge stop rules and orders of ``algorithms/artuc/merging.py``, spelled here so
#: parsing parameters does not load the anonymizer (a test keeps them equal).
STOP_RULES = ("exhaust", "paper")
MERGE_ORDERS = ("paper", "suppression-first")
#: The utility report's note on a release merged in the deviating order (the certificate
#: prints it under Utility; the parameter's help says the same beside its value).
SUPPRESSION_FIRST_NOTE = (
    "merge_order=suppression-first — a deviation from the ArtUC paper: Step 19 of "
    "Algorithm 1 takes the cluster with the least UL first (Requirement 2); this release "
    "took clusters whose codes GenDiag suppresses first (Requirement 4 ahead of Requirement "
    "2). The privacy guarantee, δ, ε and the utility constraints are checked exactly as "
    "for the paper's order")

_WEIGHT = re.compile(r"^\s*[^=,\s][^=,]*=\s*\d+(?:\.\d*)?\s*$")
_CODE_WEIGHT = re.compile(r"^\s*[^=,\s][^=,]*=\s*(?:0(?:\.\d*)?|1(?:\.0*)?|\.\d+)\s*$")


#: Parameters a configuration file may set defaults for (it describes the data they suit).
CONFIG_DEFAULTS = ("k", "m", "delta", "epsilon")


def config_defaults(given: Mapping[str, Any]) -> dict[str, str]:
    """The ``defaults:`` mapping of the configuration file ``given`` names, if any.

    A configuration is written for one kind of extract; its author knows which k, δ and ε
    suit it (the registry's own defaults are the paper's, for extracts of thousands of
    patients). An unreadable file is left to the ``config`` parameter's own check; a
    ``defaults:`` that is not a mapping of known parameters is refused.
    """
    path = given.get("config")
    if not path or not Path(str(path)).is_file():
        return {}
    try:
        raw = load_config_yaml(read_config_text(Path(str(path))), f"configuration {path}")
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    defaults = raw.get("defaults") if isinstance(raw, dict) else None
    if defaults is None:
        return {}
    if not isinstance(defaults, dict) or not set(defaults) <= set(CONFIG_DEFAULTS):
        raise ConfigError(f"configuration {path}: 'defaults' must map some of "
                          f"{', '.join(CONFIG_DEFAULTS)} to values")
    return {str(k): str(v) for k, v in defaults.items()}


def _file_or_empty(value: str) -> bool:
    return not value or Path(value).is_file()


#: compare=auto runs the comparators up to this many patients. RmR (one group: every
#: cluster is a merge candidate) took 77 s where ArtUC took 6 s at 20,838 patients, and
#: grows much faster than ArtUC with the extract.
COMPARE_AUTO_MAX = 50_000
_COMPARE = {"auto": None, **BOOL_WORDS}


def _compare_choice(params: dict[str, Any]) -> bool | None:
    """The ``compare`` parameter: True, False, or None for auto."""
    return _COMPARE[str(params.get("compare", "auto")).strip().lower()]


def wants_comparison(params: dict[str, Any], patients: int) -> bool:
    choice = _compare_choice(params)
    return patients <= COMPARE_AUTO_MAX if choice is None else choice


COMMON_PARAMS = (
    Param("k", int, "each record is indistinguishable from ≥ k−1 others given its "
          "demographics and up to m codes", default=10, check=Interval(int, 2)),
    Param("m", int, "most diagnosis codes an attacker knows", default=2,
          check=Interval(int, 1)),
    Param("epsilon", str, "most codes suppressed: a count (12) or a share of the distinct "
          "codes (6%)", default="6%",
          check=Satisfies(lambda v: EPSILON_PATTERN.match(v) is not None, EPSILON_RULE)),
    Param("config", str, "YAML file: released attributes with hierarchies/domains, utility "
          "constraints",
          check=Satisfies(lambda v: Path(v).is_file(), "must be an existing file"),
          site_path=True, example="examples/artuc-mimic/config.yaml"),
    Param("weights", str, "NCP weights NAME=W,... summing to 1 (default: the config's)",
          default="", check=Satisfies(
              lambda v: not v.strip() or all(_WEIGHT.match(i) for i in v.split(",")),
              "must look like NAME=WEIGHT,NAME=WEIGHT")),
    Param("code_weights", str, "code weights w(ũ) of UL (Def. 5 of the ArtUC paper: "
          "UL(ũ) = (2^|ũ| − 1)·w(ũ), w ∈ [0, 1] set by the data owner) per utility "
          "constraint's code set, CONSTRAINT=W,... by constraint name (default: the config's "
          "code_weight entries, else 1)", default="",
          check=Satisfies(
              lambda v: not v.strip() or all(_CODE_WEIGHT.match(i) for i in v.split(",")),
              "must look like CONSTRAINT=WEIGHT,... with weights in [0, 1]")),
    Param("seed", int, "seed of the random first picks (tests and examples only)",
          default=None),
    Param("compare", str, "evaluate also runs the other two algorithms for comparison: "
          f"true, false, or auto (true up to {COMPARE_AUTO_MAX:,} patients)", default="auto",
          check=Satisfies(lambda v: v.strip().lower() in _COMPARE,
                          "must be auto, true or false")),
)
#: The guarantee every (k, k^m) entry gives (artuc, its variants, rmr).
PRIVACY_MODEL = ("(k, k^m)-anonymity: an attacker knowing all demographics and up to m codes "
                 "of a patient cannot tell its record from ≥ k−1 others")

#: The paper's default NCP bound δ (§5.1); written here only.
DEFAULT_DELTA = 0.04
DELTA = Param("delta", float, "NCP bound δ of the generalized demographics",
              default=DEFAULT_DELTA,
              check=Interval(float, 0, 1))
CONSTRAINTS = Param("constraints", str, "YAML file whose 'constraints' list replaces the "
                    "config's", default="",
                    check=Satisfies(_file_or_empty, "must be empty or an existing file"))
PARAMS = (*COMMON_PARAMS[:2], DELTA, *COMMON_PARAMS[2:4], CONSTRAINTS, *COMMON_PARAMS[4:])

#: ArtUC's own options (RmR and Baseline do not take them).
ARTUC_PARAMS = (
    *PARAMS,
    Param("merge_stop", str, "what cluster merging (Steps 18–22 of the ArtUC paper) does when "
          "the least-UL cluster has no partner within δ: 'exhaust' (default) sets it aside and "
          "tries the next, ending when no merge is possible (Step 22's 'until the set of "
          "clusters does not change'); 'paper' stops merging there, as §4.1 says ('Otherwise, "
          "the cluster merging stops'). The default is a deviation kept because earlier "
          "releases used it and it suppresses fewer codes (20,838 generated patients: 56,971 "
          "vs 57,773)", default="exhaust", choices=STOP_RULES),
    Param("merge_order", str, "which cluster Step 19 of Algorithm 1 (ArtUC paper) takes "
          "first for merging: 'paper' (default) the cluster with the least UL, as the paper "
          "says (Requirement 2, minimum UL, first); 'suppression-first' is a DEVIATION FROM "
          "THE PAPER: clusters whose codes GenDiag suppresses are taken before the others "
          "(least UL first among each), putting Requirement 4 (at most ε codes suppressed) "
          "ahead of Requirement 2, so they find partners before clusters that suppress "
          "nothing have spent the NCP budget δ; the certificate names it when used. "
          "Measured (20,000 generated patients, k=5, δ=0.04): 5,010 vs 5,205 codes "
          "suppressed, ε not met by either",
          default="paper", choices=MERGE_ORDERS),
    Param("relax", bool, "run Algorithm 2 of the ArtUC paper (§4.3, progressive relaxation "
          "of Requirements 1 and 4) instead of failing when ε (Step 26) or δ (Step 16) "
          "cannot be met: merging continues above δ, up to relax_delta, while more than ε "
          "codes are suppressed, and ε itself may then rise to relax_epsilon; the utility "
          "constraints and (k, k^m)-anonymity are never relaxed; the certificate lists what "
          "was relaxed", default=False),
    Param("relax_delta", float, "with relax=true: the largest NCP the data owner accepts "
          "(Algorithm 2, steps 3 and 14); ≥ delta", default=1.0,
          check=Interval(float, 0, 1)),
    Param("relax_epsilon", str, "with relax=true: the most codes suppressed the data owner "
          "accepts (Algorithm 2, step 17), as a count or a share like epsilon; empty: epsilon "
          "(ε is not relaxed)", default="",
          check=Satisfies(lambda v: not v.strip() or EPSILON_PATTERN.match(v) is not None,
                          "must be empty or " + EPSILON_RULE.removeprefix("must be "))),
)


def config_of(params: Mapping[str, Any]) -> RTConfig:
    """The configuration named by the parameters, with the weight overrides applied: as the
    release's plan loaded it (:func:`prepare_inputs`), else read now."""
    from ehr_release.configuration.constraints import config_from_params

    return prepared(params, "config", lambda: config_from_params(params))


def prepare_inputs(params: Mapping[str, Any]) -> dict[str, Any]:
    """Load the configuration once per release (every stage gets it from the plan)."""
    from ehr_release.configuration.constraints import config_from_params

    return {"config": config_from_params(params)}


def epsilon_of(params: dict[str, Any], dataset: Dataset) -> float:
    return resolve_epsilon(params["epsilon"], len(dataset.distinct_codes()))


def relaxing_of(params: dict[str, Any], dataset: Dataset) -> Relaxing | None:
    """Algorithm 2's ceilings when ``relax`` is on (only ArtUC declares it), else None."""
    ceilings = relax_ceilings(params, len(dataset.distinct_codes()))
    if ceilings is None:
        return None
    from ehr_release.algorithms.artuc import Relaxing

    return Relaxing(ceilings.delta_max, ceilings.epsilon_max)


def run(name: str, dataset: Dataset, params: dict[str, Any],
        rng: np.random.Generator) -> ReleaseFiles:
    """One of the four algorithms on ``dataset`` → its release files."""
    if name == "rmr":  # Poulis et al. 2013 (issue 19): its own entry, found by name, since
        from ehr_release.registry import get as get_entry  # registry.rmr builds on this module

        return get_entry("rmr").anonymize(dataset, params, rng)
    from ehr_release.algorithms.artuc import artuc, artuc_unconstrained, baseline, release_files
    from ehr_release.configuration.constraints import rt_data
    from ehr_release.runtime.workers import gendiag_runner

    config = config_of(params)
    data = rt_data(dataset, config)
    eps = epsilon_of(params, dataset)
    runner = gendiag_runner()
    if name == "artuc-baseline":
        anon = baseline(data, config, k=params["k"], m=params["m"], epsilon=eps,
                        gendiag_runner=runner)
    else:
        algo = artuc if name == "artuc" else artuc_unconstrained
        anon = algo(data, config, k=params["k"], m=params["m"],
                    delta=params["delta"], epsilon=eps, rng=rng,
                    gendiag_runner=runner)
    return release_files(anon)


#: The algorithms ArtUC's evaluation sets side by side (the paper's §5).
COMPARED = ("artuc", "rmr", "artuc-baseline")


def comparator_release(name: str, original: Dataset, params: dict[str, Any]) -> ReleaseFiles:
    """``name``'s release of ``original`` at these parameters, for comparison: from the
    comparison's store when the evaluation runs inside one (made once for all its
    candidates, :mod:`ehr_release.parameters.comparators`), else made now."""
    from ehr_release.parameters.comparators import release_key, store_of
    from ehr_release.registry import get as get_entry

    def make() -> ReleaseFiles:
        return run(name, original, params, check_random_state(params.get("seed")))

    store = store_of(params)
    if store is None:
        return make()
    return store.get(release_key(name, get_entry(name).params, params), original, make)


def evaluate(name: str, files: ReleaseFiles, original: Dataset, params: dict[str, Any],
             rng: np.random.Generator) -> UtilityReport:
    """ArtUC's evaluation (:func:`ehr_release.utility.artuc.evaluate`) with the comparators
    only the registry can make: RmR's and Baseline's releases of the same extract."""
    from ehr_release.utility.artuc import evaluate as evaluate_kkm

    comparators = {}
    compare = wants_comparison(params, original.n_patients)
    if compare:
        for other in (n for n in COMPARED if n != name):
            comparators[other] = partial(comparator_release, other, original, params)
    report = evaluate_kkm(files, original, params, rng, algorithm=name,
                          comparators=comparators)
    if name == "artuc" and params.get("merge_order", "paper") != "paper":
        report.notes.insert(0, SUPPRESSION_FIRST_NOTE)
    if not compare and _compare_choice(params) is None:
        report.notes.append(f"no comparison with RmR and Baseline: the extract has "
                            f"{original.n_patients:,} patients, more than compare=auto's "
                            f"limit of {COMPARE_AUTO_MAX:,} (compare=true runs it)")
    return report


def _anonymize(dataset: Dataset, params: dict[str, Any],
               rng: np.random.Generator) -> ReleaseFiles:
    from ehr_release.algorithms.artuc import artuc, release_files
    from ehr_release.configuration.constraints import rt_data
    from ehr_release.runtime.workers import gendiag_runner

    config = config_of(params)
    anon = artuc(rt_data(dataset, config), config, k=params["k"], m=params["m"],
                 delta=params["delta"], epsilon=epsilon_of(params, dataset), rng=rng,
                 gendiag_runner=gendiag_runner(),
                 stop=params.get("merge_stop", "exhaust"),
                 order=params.get("merge_order", "paper"),
                 relaxing=relaxing_of(params, dataset))
    return release_files(anon)  # anon.relaxations stay out: evaluate recomputes them


def verifier(name: str) -> Callable[..., VerificationReport]:
    """The (k, k^m) verifier as ``name`` is held to it (:func:`ehr_release.privacy.kkm.verify`
    decides the NCP bound, the utility constraints and Algorithm 2's ceilings by name)."""
    return lazy("ehr_release.privacy.kkm", "verify", algorithm=name)


#: The (k, k^m) adversary (:mod:`ehr_release.privacy.attacks.kkm`), loaded when used.
attack = lazy("ehr_release.privacy.attacks.kkm", "attack")


ENTRY = AlgorithmEntry(
    name="artuc",
    summary="ArtUC: (k, k^m)-anonymity of demographics + diagnosis codes under the data "
            "owner's utility constraints (clustering by NCP, merging by UL, set-generalized "
            "codes)",
    privacy_model=PRIVACY_MODEL,
    params=ARTUC_PARAMS,
    anonymize=_anonymize,
    verify=verifier("artuc"),
    evaluate=lambda files, original, params, rng: evaluate("artuc", files, original, params,
                                                           rng),
    headline_loss="ARE W3",
    schema=SCHEMA,
    attack=attack,
    count_records=count_records,
    defaults_from=config_defaults,
    prepare=prepare_inputs,
)
