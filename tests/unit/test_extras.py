"""What the levels add to a run (fourfold.levels.extras): the order finishers run in, which blocks
outlive a test, the record listeners and the live blocks."""

from __future__ import annotations

from fourfold.levels.extras import Extras
from fourfold.measure.record import RequestRecord


def test_finishers_run_the_last_registered_first_and_a_first_one_last():
    extras, ran = Extras(), []
    extras.on_finish(lambda env: ran.append(("level", env)))
    extras.on_finish(lambda env: ran.append(("live quality", env)), first=True)   # reads the levels' blocks
    extras.on_finish(lambda env: ran.append(("later level", env)))
    extras.finish("env")
    assert ran == [("later level", "env"), ("level", "env"), ("live quality", "env")]


def test_a_new_test_empties_the_summary_blocks_and_keeps_meta_and_registrations():
    extras = Extras()
    extras.meta["l2"] = {"ladder": [1, 2]}
    extras.summary["l2"] = {"knee": 2}
    extras.on_finish(lambda env: extras.summary.update(again=env))
    extras.new_test()
    assert extras.summary == {} and extras.meta == {"l2": {"ladder": [1, 2]}}
    extras.finish("env")
    assert extras.summary == {"again": "env"}


def test_records_reach_every_listener_in_order():
    extras, seen = Extras(), []
    extras.on_record(lambda r: seen.append(("a", r.item_id)))
    extras.on_record(lambda r: seen.append(("b", r.item_id)))
    for item in ("q1", "q2"):
        extras.record(RequestRecord(level="l1", scenario="s", item_id=item))
    assert seen == [("a", "q1"), ("b", "q1"), ("a", "q2"), ("b", "q2")]


def test_live_blocks_merge_in_order_and_a_level_with_nothing_adds_nothing():
    extras = Extras()
    assert not extras.has_blocks and extras.live("env") == {}
    extras.on_block(lambda env: {"rag": {"env": env}})
    extras.on_block(lambda env: None)                        # nothing yet
    extras.on_block(lambda env: {})
    extras.on_block(lambda env: {"l2": {"steps": 1}, "rag": {"later": True}})
    assert extras.has_blocks
    assert extras.live("env") == {"rag": {"later": True}, "l2": {"steps": 1}}
