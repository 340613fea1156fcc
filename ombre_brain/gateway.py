"""The gateway's state holder: durable sessions, cooldowns and the injection log.

`Brain.turn` builds each turn through :mod:`pipeline` and :mod:`sections`; this object owns
what must survive between turns and restarts (the ledger-backed session store) and the
background ingestion worker that turns finished exchanges into memory.
"""

from __future__ import annotations

from datetime import datetime

from .sessions import SessionStore


class Gateway:
    def __init__(self, brain) -> None:
        self.brain = brain
        gw = brain.config.gateway
        self.sessions = SessionStore(brain.ledger, log_size=gw.injection_log_size, expiry_days=gw.session_expiry_days)

    def after_dream_surfaced(self, space: str, dream_ids: list[str], now: datetime) -> None:
        engine = self.brain._optional("dream_engine")
        if engine is not None:
            engine.after_surfaced(space, dream_ids, now)

    def injections(self, space: str, session: str | None = None, limit: int = 20) -> list[dict]:
        return self.sessions.injections_log(space, session, limit)

    def reconcile(self) -> None:
        """Nothing half-done to finish for sessions: each turn is one ledger transaction."""

    def close(self) -> None:
        pass
