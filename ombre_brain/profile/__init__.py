"""The profile: who the user is and how to be with them, one short line per stable fact or lesson (design §24).

``frames`` reads a line's holder, attributes and changes, and which lines a newer one supersedes by rule;
``supersede`` is the learned changed-fact model; ``lines`` chooses the sentence a memory shows; ``book`` holds a
space's current lines and chooses a turn's; ``cache`` keeps each space's book current with the store's change
sequence. The turn's stage is ``turn/profile.py``. Import the modules themselves: the package imports nothing, so
the reader (``retrieval/reading.py``) can read frames without loading the cache.
"""
