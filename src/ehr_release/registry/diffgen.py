"""Registry entry ``diffgen``: ε-differentially private generalization with an ε ledger.

Ties together the anonymizer (``algorithms/diffgen``), the independent ledger and counts
verifier (``privacy/diffgen.py``), the closed-world schema (``privacy/formats/diffgen.py``),
the attack audit (``privacy/attacks/diffgen.py``) and the utility evaluation
(``utility/diffgen.py``).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from ehr_release.configuration.taxonomies import load_config, shipped_names
from ehr_release.core.randomness import test_mode
from ehr_release.parameters.params import Interval, Param, Satisfies
from ehr_release.privacy.formats.diffgen import SCHEMA
from ehr_release.registry import AlgorithmEntry, lazy

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    import numpy as np

    from ehr_release.model.dataset import Dataset

#: Choices of the utility's accuracy protocol, spelled here so parsing parameters does not
#: import scikit-learn (``utility/diffgen.py`` holds the same tuples; a test keeps them equal).
CLASSIFIERS = ("cart", "c45")
#: The anonymizer's choices, spelled here for the same reason (``algorithms/diffgen`` loads
#: pandas); a test keeps them equal to the anonymizer's own.
SCORES = ("max", "infogain")
UNUSED_POLICIES = ("final-counts", "discard")
FORMATS = ("csv", "parquet")
PROTOCOLS = ("splits", "10x10cv")


def _loads(spec: str) -> bool:
    """A configuration is valid if it loads; its own error names the problem otherwise."""
    return load_config(spec) is not None


PARAMS = (
    Param("epsilon", float, "total privacy budget ε (> 0)",
          check=Interval(float, 0, closed="neither"), example="1"),
    Param("h", int, "number of specializations (≥ 1)", check=Interval(int, 1), example="10"),
    Param("taxonomies", str, "public configuration: "
          f"{' | '.join(shipped_names())} or a YAML file (taxonomies, domains, class values)",
          check=Satisfies(_loads, "must be a loadable configuration"),
          site_path=True, example="adult"),
    Param("score", str, "score of a specialization", default="max", choices=SCORES),
    Param("domains", str, "override numerical domains, NAME=LO:HI;NAME=LO:HI (public bounds)",
          default=None),
    Param("predictors", str, "comma-separated subset of the configured attributes",
          default=None),
    Param("class_column", str, "class column (default: the configuration's)", default=None),
    Param("unused_budget", str, "where ε' a step did not need goes", default="final-counts",
          choices=UNUSED_POLICIES),
    Param("format", str, "groups file format", default="csv", choices=FORMATS),
    Param("eval_runs", int, "train/test runs of the paper's accuracy protocol (utility)",
          default=10, check=Interval(int, 0)),
    Param("classifier", str, "classifier of the accuracy figures (utility): cart = "
          "scikit-learn CART, entropy, cost-complexity pruned (a deviation: the paper names "
          "C4.5); c45 = C4.5 as in Mohammed et al. 2013 §Experiments (gain ratio, multiway "
          "categorical splits, error-based pruning at CF 0.25), slower on raw data",
          default="cart", choices=CLASSIFIERS),
    Param("protocol", str, "accuracy protocol (utility): splits = eval_runs random 2/3-1/3 "
          "splits (the paper's MIMIC setting); 10x10cv = eval_runs runs of stratified "
          "10-fold cross-validation, the setting of the paper's Adult comparison ('10 runs "
          "of 10-fold cross-validation', Mohammed et al. 2013 §Experiments, Figure 5A): 10 "
          "DiffGen runs per run, about 5 CPU-minutes for 10 runs on Adult with c45",
          default="splits", choices=PROTOCOLS),
    Param("seed", int, "test mode only: reproducible (insecure) noise", default=None,
          check=Satisfies(lambda v: test_mode(),
                          "is only accepted in test mode: differentially private noise is "
                          "never seeded in production")),
)


# The verifier, attack and evaluation load SciPy and scikit-learn (seconds): they are
# imported where used, so a refused request does not wait for them.
def anonymize(dataset: Dataset, params: dict[str, Any],
              rng: np.random.Generator) -> dict[str, bytes]:
    """Check the data against the public configuration, run DiffGen, serialize."""
    from ehr_release.algorithms.diffgen import encode_dataset, noise_source, run_diffgen
    from ehr_release.algorithms.diffgen.release import release_files
    from ehr_release.utility.diffgen import config_for, diffgen_params

    config = config_for(params)
    enc = encode_dataset(dataset, config)
    run_params = diffgen_params(params)
    result = run_diffgen(enc, run_params, noise_source(params.get("seed"), rng))
    return release_files(result, config, run_params, params["format"])


def count_records(files: dict[str, bytes]) -> int:
    """The records the release stands for: the sum of its (noisy, clamped) group counts.

    Not the number of groups, which is never 0 for a run that kept any partition: a release
    whose every count is 0 holds nothing a classifier can be trained on.
    """
    import pandas as pd

    if "groups.csv" in files:
        counts = pd.read_csv(io.BytesIO(files["groups.csv"]), usecols=["count"])["count"]
    elif "groups.parquet" in files:
        counts = pd.read_parquet(io.BytesIO(files["groups.parquet"]), columns=["count"])[
            "count"]
    else:
        return 0
    return int(round(float(pd.to_numeric(counts).clip(lower=0).sum())))


ENTRY = AlgorithmEntry(
    name="diffgen",
    summary="DiffGen: ε-differentially private generalization of relational and set-valued "
            "data for classification (Mohammed et al., JAMIA 2013), with an ε ledger",
    privacy_model="ε-differential privacy (add/remove one record); every mechanism "
                  "invocation is in ledger.json and its composition is re-checked",
    params=PARAMS,
    anonymize=anonymize,
    verify=lazy("ehr_release.privacy.diffgen", "verify"),
    evaluate=lazy("ehr_release.utility.diffgen", "evaluate"),
    schema=SCHEMA,
    attack=lazy("ehr_release.privacy.attacks.diffgen", "attack"),
    count_records=count_records,
    differentially_private=True,
)
