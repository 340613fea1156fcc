"""The planner reads what a message is (context_mode) on a hand-labelled set of 100+ messages, zh and en."""

from __future__ import annotations

from pathlib import Path

from ombre_brain.evaluate.plan import eval_plan

DATA = Path(__file__).parent / "data" / "context_modes.yaml"


def test_context_modes_on_the_labelled_set():
    res = eval_plan(DATA)
    assert res["messages"] >= 100
    assert res["accuracy"] >= 95.0, res["misses"]
    assert all(v >= 90.0 for v in res["by_language"].values()), res["by_language"]


def test_a_headache_is_not_a_memory_lookup():
    """Telling a user who mentions a headache to 'answer from the recalled memories only' was the first-day bug."""
    from ombre_brain.config import load_config
    from ombre_brain.recall_policy import RecallPolicy

    policy = RecallPolicy(load_config())
    for msg in ("最近你怎么样，我这几天头有点疼", "I've had a headache for the past few days", "我最近开始练瑜伽了"):
        assert policy.plan_query(msg).context_mode == "casual", msg
    for msg in ("最近我们都聊了些什么", "我那只狗叫什么名字来着", "Did I ever tell you where I grew up?"):
        assert policy.plan_query(msg).context_mode == "memory_lookup", msg
