import pytest

from elasticdl.runtime.master.chaos import ChaosSpecError, due_actions, parse_chaos


def test_parse_the_documented_examples():
    actions = parse_chaos(
        "worker1:kill@tasks=3, worker0:term@seconds=5,ps0:kill@seconds=20,worker:add@seconds=4"
    )
    assert [str(a) for a in actions] == [
        "worker1:kill@tasks=3",
        "worker0:term@seconds=5",
        "ps0:kill@seconds=20",
        "worker:add@seconds=4",
    ]
    assert parse_chaos("") == [] and parse_chaos(None) == []


@pytest.mark.parametrize(
    "spec",
    [
        "worker1:explode@tasks=3",
        "worker1:kill",
        "worker:kill@tasks=1",
        "ps:add@seconds=1",
        "ps0:kill@tasks=2",
        "worker1:kill@tasks=-1",
        "worker1;kill@tasks=1",
    ],
)
def test_bad_specs_are_clear_errors(spec):
    with pytest.raises(ChaosSpecError, match="--chaos"):
        parse_chaos(spec)


def test_triggers_fire_once():
    actions = parse_chaos("worker1:kill@tasks=2,worker:add@seconds=1.5")
    assert due_actions(actions, 0.0, {1: 1}) == []
    fired = due_actions(actions, 2.0, {1: 1})
    assert [str(a) for a in fired] == ["worker:add@seconds=1.5"]
    fired = due_actions(actions, 3.0, {1: 2})
    assert [str(a) for a in fired] == ["worker1:kill@tasks=2"]
    assert due_actions(actions, 9.0, {1: 9}) == []
