"""Prefect wiring that needs no server: the deployment file and the retry policy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml
from prefect.states import Failed
from sqlalchemy.exc import OperationalError

from ehr_release.errors import InputError, ParameterError
from ehr_release.tasks.retry import is_transient

ROOT = Path(__file__).resolve().parents[1]


def test_prefect_yaml_deploys_the_release_flow():
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    (deployment,) = config["deployments"]
    path, func = deployment["entrypoint"].split(":")
    spec = importlib.util.spec_from_file_location("entry", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    flow = getattr(module, func)
    assert flow.name == "governed_release"
    assert "request" in flow.parameters.properties


def _state(exc: BaseException):
    return Failed(data=exc)


def test_only_transient_errors_are_retried():
    assert is_transient(None, None, _state(OSError("disk hiccup")))
    assert is_transient(None, None, _state(OperationalError("x", {}, Exception("locked"))))
    assert not is_transient(None, None, _state(InputError("bad row", file="f.csv", row=2)))
    assert not is_transient(None, None, _state(ParameterError("k", "must be ≥ 2", 1)))
    assert not is_transient(None, None, _state(ValueError("bug")))
