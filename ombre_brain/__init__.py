"""Ombre Brain: layered, explainable memory for companion chatbots.

    from ombre_brain import Brain
    with Brain.open("ombre-data") as brain:
        bid = brain.write(space="haven:xiaoyu", title="…", body="…")
        turn = brain.turn(space="haven:xiaoyu", session="s1", query="…")
        print(turn.rendered)
"""

from .brain import Brain
from .buckets import Bucket, Moment
from .config import Config, load_config
from .errors import (
    AuthError,
    BudgetError,
    ConfigError,
    ConflictError,
    DataDirInUseError,
    DuplicateError,
    EmbeddingError,
    ForbiddenError,
    NotFoundError,
    OmbreError,
    ProvenanceError,
    SourceSuppressedError,
    SpaceError,
    StaleTargetError,
    StoreError,
    UpstreamError,
    ValidationError,
)
from .recall_types import LayerDecision, QueryPlan, RuntimeGate
from .turn.sections import Turn

__all__ = [
    "AuthError",
    "Brain",
    "Bucket",
    "BudgetError",
    "Config",
    "ConfigError",
    "ConflictError",
    "DataDirInUseError",
    "DuplicateError",
    "EmbeddingError",
    "ForbiddenError",
    "LayerDecision",
    "Moment",
    "NotFoundError",
    "OmbreError",
    "ProvenanceError",
    "QueryPlan",
    "RuntimeGate",
    "SourceSuppressedError",
    "SpaceError",
    "StaleTargetError",
    "StoreError",
    "Turn",
    "UpstreamError",
    "ValidationError",
    "load_config",
]
__version__ = "0.1.0"
