"""Cooldowns live in the ledger: an item injected before a restart is still skipped after it."""

from __future__ import annotations

import httpx

from ombre_brain import Brain

from .conftest import LiveServer

SPACE = "haven:xiaoyu"
CONFIG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}}
QUERY = "还记得我们去海边那次吗"


def inject(brain: Brain, session: str) -> dict:
    server = LiveServer(brain)
    try:
        r = httpx.post(f"{server.url}/v1/inject", json={"space": SPACE, "session_id": session, "query": QUERY},
                       timeout=30)
        assert r.status_code == 200, r.text
        return r.json()
    finally:
        server.close()


def injected(turn: dict) -> list[str]:
    return [i["bucket_id"] for s in (*turn["stable"], *turn["sections"]) for i in s["items"] if i["bucket_id"]]


def ids_in(turn: dict, *keys: str) -> list[str]:
    return [i["bucket_id"] for s in turn["sections"] if s["key"] in keys for i in s["items"] if i["bucket_id"]]


def recalled(turn: dict) -> list[str]:
    return ids_in(turn, "recalled_memory", "diffused_memory")


def test_cooldown_survives_a_restart(brain_path):
    with Brain.open(brain_path, CONFIG) as brain:
        brain.write(space=SPACE, id="sea", title="一起去海边", tags=["海边"],
                    body="我们一起去海边捡贝壳，你说海风很咸，我把最大的那个贝壳送给了你。")
        assert injected(inject(brain, "s1")) == ["sea"]

    with Brain.open(brain_path, CONFIG) as brain:  # a restart: new process state, same data directory
        turn = inject(brain, "s1")
        assert "sea" not in recalled(turn)  # the cooldown holds: not recalled again…
        assert "sea" in ids_in(turn, "recent_context")  # …but carried, compact, while the talk is on it (§14)
        skipped = [s for s in turn["suppressed"] if s["bucket_id"] == "sea"]
        assert skipped and {s["reason"] for s in skipped} == {"skipped_recent_rounds"}
        assert skipped[0]["runtime_gate"]["cooldown"]["allowed"] is False
        assert "UNKNOWN" not in turn["rendered"]  # shown earlier in this conversation: still supporting memory
        # cooldowns are per session: another session recalls it at once
        assert injected(inject(brain, "s2")) == ["sea"]
