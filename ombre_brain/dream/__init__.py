"""The dream engine: dreams composed from recent memory, surfacing once by resonance (design §4).

``engine`` does the I/O (material, storage, claims, rings); ``compose`` is the pure half
(choosing material, the collage, resonance). Whether a dream surfaces is the dream gate's call.
"""
