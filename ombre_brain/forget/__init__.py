"""Forgetting (design §10): purges with signed receipts, suppressed sources, signing keys.

``purge`` runs a purge crash-safely across every capability; ``receipts`` signs and verifies
(pure); ``keys`` finds the signing key (configured, or the data directory's local one).
"""
