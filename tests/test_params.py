import pytest

from ehr_release.core.errors import ParameterError
from ehr_release.parameters.params import (
    REQUIRED,
    Interval,
    OneOf,
    Param,
    Satisfies,
    parse_assignments,
    parse_params,
)

SPEC = [Param("k", int, "k", check=Interval(int, 2)),
        Param("eps", float, "epsilon", default=1.0, check=Interval(float, 0, closed="neither")),
        Param("score", str, "score", default="max", choices=("max", "infogain"))]


def test_strings_are_converted_and_defaults_applied():
    assert parse_params(SPEC, {"k": "5"}) == {"k": 5, "eps": 1.0, "score": "max"}


@pytest.mark.parametrize("given, fragment", [
    ({}, "k is required: k, e.g. --param k=2"),
    ({"k": "1"}, "must be an integer ≥ 2; got '1'"),
    ({"k": "five"}, "k must be a whole number, got 'five'"),
    ({"k": "2.5"}, "k must be a whole number, got '2.5'"),
    ({"k": "3", "eps": "-1"}, "'eps' must be a finite number > 0"),
    ({"k": "3", "eps": "inf"}, "'eps' must be a finite number > 0"),
    ({"k": "3", "score": "median"}, "must be one of max, infogain"),
    ({"k": "3", "q": "1"}, "'q' is not a parameter (known: eps, k, score)"),
    ({"k": "3", "kk": "1"}, "'kk' is not a parameter; did you mean 'k'?"),
    ({"k": "3", "scor": "max"}, "'scor' is not a parameter; did you mean 'score'?"),
])
def test_bad_parameters_name_the_problem(given, fragment):
    with pytest.raises(ParameterError, match=None) as err:
        parse_params(SPEC, given)
    assert fragment in str(err.value)


def test_assignments():
    assert parse_assignments(["k=5", "m = 2"]) == {"k": "5", "m": "2"}
    with pytest.raises(ParameterError, match="NAME=VALUE"):
        parse_assignments(["k5"])
    with pytest.raises(ParameterError, match="more than once"):
        parse_assignments(["k=5", "k=6"])


def test_every_algorithms_seed_is_refused_outside_test_mode(monkeypatch) -> None:
    from ehr_release import registry

    seeded = [registry.get(n) for n in registry.names()
              if any(p.name == "seed" for p in registry.get(n).params)]
    assert seeded, "no algorithm declares a seed"
    monkeypatch.delenv("EHR_RELEASE_TEST_MODE", raising=False)
    for entry in seeded:
        seed_spec = [p for p in entry.params if p.name == "seed"]
        with pytest.raises(ParameterError, match="'seed' is only accepted in test mode"):
            parse_params(seed_spec, {"seed": "7"})
        assert parse_params(seed_spec, {})["seed"] is None
    monkeypatch.setenv("EHR_RELEASE_TEST_MODE", "1")
    seed_only = [p for p in seeded[0].params if p.name == "seed"]
    assert parse_params(seed_only, {"seed": "7"})["seed"] == 7


@pytest.mark.parametrize(("constraint", "good", "bad", "rule"), [
    (Interval(int, 2), [2, 50], [1, -3], "must be an integer ≥ 2"),
    (Interval(float, 0, 1), [0.0, 0.5, 1.0], [-0.1, 1.01, float("nan")],
     "must be a number in [0, 1]"),
    (Interval(float, 0, closed="neither"), [1e-9, 3.0], [0.0, float("inf")],
     "must be a finite number > 0"),
    (Interval(float, 0, 1, closed="left"), [0.0, 0.99], [1.0], "must be a number in [0, 1)"),
    (Interval(int, None, 10, closed="neither"), [9, -4], [10], "must be an integer < 10"),
    (Interval(int, 2, note="and ≥ k"), [2], [1], "must be an integer ≥ 2 (and ≥ k)"),
    (OneOf((0, 1)), [0, 1], [2], "must be 0 or 1"),
    (OneOf(("a", "b", "c")), ["b"], ["d"], "must be one of a, b, c"),
    (Satisfies(str.isupper, "must be upper case"), ["AB"], ["ab"], "must be upper case"),
])
def test_constraints_test_values_and_word_their_rule(constraint, good, bad, rule) -> None:
    """Each constraint writes the rule its error message gives (no separate rule string)."""
    assert all(constraint(v) for v in good) and not any(constraint(v) for v in bad)
    assert constraint.rule == rule


def test_cli_errors_are_plain_english_with_did_you_mean() -> None:
    """Issue 34: "parameter 'k' is required; got None", "must be of type int", and no
    did-you-mean for ``kk`` or ``disasociation``."""
    from ehr_release import registry

    with pytest.raises(ParameterError) as err:
        registry.get("disassociation").parse({})
    assert str(err.value) == ("k is required: every itemset of ≤ m codes is hidden among ≥ k "
                              "records, e.g. --param k=5")
    with pytest.raises(ParameterError) as err:
        registry.get("disassociation").parse({"k": "abc"})
    assert str(err.value) == "k must be a whole number, got 'abc'"
    with pytest.raises(ParameterError) as err:
        registry.get("disasociation")
    assert "did you mean 'disassociation'?" in str(err.value)
    with pytest.raises(ParameterError) as err:
        registry.get("zzz")
    assert "did you mean" not in str(err.value) and "known: artuc" in str(err.value)
    for name in registry.names():  # every required parameter suggests a typical value
        for p in registry.get(name).params:
            if p.default is REQUIRED:
                assert p.example, f"{name}: required parameter {p.name} has no example"
