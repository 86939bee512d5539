"""Prefect wiring that needs no server: the deployment file and the retry policy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml
from prefect.states import Failed
from sqlalchemy.exc import OperationalError

from ehr_release.core.errors import InputError, ParameterError
from ehr_release.tasks.retry import is_transient

ROOT = Path(__file__).resolve().parents[1]


def test_prefect_yaml_deploys_the_release_and_publish_flows():
    """A server deployment can run a release and, once a decision is recorded, publish it."""
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    flows = {}
    for deployment in config["deployments"]:
        path, func = deployment["entrypoint"].split(":")
        spec = importlib.util.spec_from_file_location(f"entry_{func}", ROOT / path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        flows[deployment["name"]] = getattr(module, func)
    assert flows["governed-release"].name == "governed_release"
    assert "request" in flows["governed-release"].parameters.properties
    assert flows["publish-release"].name == "publish_flow"
    assert "run_id" in flows["publish-release"].parameters.properties


def _state(exc: BaseException):
    return Failed(data=exc)


def test_only_transient_errors_are_retried():
    assert is_transient(None, None, _state(OSError("disk hiccup")))
    assert is_transient(None, None, _state(OperationalError("x", {}, Exception("locked"))))
    assert not is_transient(None, None, _state(InputError("bad row", file="f.csv", row=2)))
    assert not is_transient(None, None, _state(ParameterError("k", "must be ≥ 2", 1)))
    assert not is_transient(None, None, _state(ValueError("bug")))


def test_prefect_does_not_walk_a_datasets_cached_views():
    """Every task that takes the dataset would otherwise walk a million cached code sets."""
    from prefect.utilities.collections import visit_collection

    from ehr_release.model.dataset import Dataset

    ds = Dataset.from_records([["250.00", "401.9"], ["272.0"]], patient_ids=["a", "b"])
    assert ds.code_sets()  # fills the cache
    seen: list[object] = []
    visit_collection(ds, lambda x: seen.append(x) or x, return_data=False)
    assert seen and not any(isinstance(x, frozenset | list) for x in seen)
