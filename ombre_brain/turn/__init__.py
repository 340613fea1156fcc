"""The read pipeline of one turn, one stage per module (design §2):

    plan_query -> candidates -> admission -> layers and gates -> diffusion -> render -> budget -> sections

``pipeline`` runs the line; ``select`` (direct hits), ``related`` (diffusion), ``side`` (recent
context, weather, favorite, dream, core, facts) and ``items`` (render) are the stages; ``gates``
makes every decision and ``reasons`` names every reason code; ``render``, ``budget``,
``diffusion`` and ``sections`` are pure.
"""
