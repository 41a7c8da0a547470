import pytest

from elasticdl.runtime.params import (
    ParamsError,
    accepted_names,
    bind_params,
    check_all_accepted,
    format_params,
    parse_params,
)


def test_design_document_example():
    assert parse_params("hidden_units=[10, 100, 20, 5], learning_rate=0.01") == {
        "hidden_units": [10, 100, 20, 5],
        "learning_rate": 0.01,
    }


def test_semicolons_quotes_dicts_and_bare_words():
    text = "a=1; b='x, y'; c={'k': (1, 2)}; act=relu; fn=tf.nn.relu; flag=True; none=None"
    assert parse_params(text) == {
        "a": 1,
        "b": "x, y",
        "c": {"k": (1, 2)},
        "act": "relu",
        "fn": "tf.nn.relu",
        "flag": True,
        "none": None,
    }


@pytest.mark.parametrize("text", [None, "", "  ", ",", " ; "])
def test_empty(text):
    assert parse_params(text) == {}


def test_round_trip_of_format():
    params = {"hidden_units": [10, 100], "lr": 0.5, "name": "a b", "nested": {"x": (1,)}}
    assert parse_params(format_params(params)) == params


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("x=__import__('os').system('true')", "not a Python literal"),
        ("x=open('/etc/passwd')", "not a Python literal"),
        ("x=1+", "not a Python literal"),
        ("x=[1, 2", "unclosed"),
        ("x=1]", "unbalanced"),
        ("x='abc", "unterminated"),
        ("justaword", "name=value"),
        ("1x=3", "not a valid parameter name"),
        ("x=", "has no value"),
        ("x=1, x=2", "given twice"),
    ],
)
def test_bad_params_are_clear_errors(text, fragment):
    with pytest.raises(ParamsError, match=fragment):
        parse_params(text)


def test_code_is_never_run(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ParamsError):
        parse_params(f"x=__import__('pathlib').Path({str(marker)!r}).touch()")
    assert not marker.exists()


def test_binding_by_signature_with_learning_rate_alias():
    def optimizer(lr=0.1):
        return lr

    def model(hidden_units, activation="relu"):
        return hidden_units

    params = {"hidden_units": [3], "learning_rate": 0.5}
    assert bind_params(optimizer, params) == {"lr": 0.5}
    assert bind_params(model, params) == {"hidden_units": [3]}

    def takes_all(context=None, **kwargs):
        return kwargs

    assert accepted_names(takes_all) is None
    assert bind_params(takes_all, params, reserved=("context",)) == params


def test_unknown_param_lists_accepted_names():
    def model(hidden_units):
        return hidden_units

    def optimizer(lr=0.1):
        return lr

    acceptors = {"m.model": accepted_names(model), "m.optimizer": accepted_names(optimizer)}
    check_all_accepted({"hidden_units": 1, "learning_rate": 0.1}, acceptors)
    with pytest.raises(ParamsError) as err:
        check_all_accepted({"hiden_units": 1}, acceptors)
    message = str(err.value)
    assert "'hiden_units'" in message
    assert "hidden_units" in message and "lr" in message
