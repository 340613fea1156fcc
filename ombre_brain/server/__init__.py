"""The HTTP server: the Flask app and its production `/v1` blueprints (design §8).

``app`` builds the app and its one error policy (bodies, tokens and spaces are parsed by the
neutral :mod:`ombre_brain.web`, which the debug pages and ``/mcp`` share); ``api_buckets``,
``api_facts``, ``api_gateway`` (inject and the proxy) and ``api_forget`` are the routes; ``wsgi``
puts the app under waitress, whose own refusals (413, 431, 400) answer in the same JSON error
shape. The debug UI is a blueprint of the same app (``ombre_brain.debug_ui``).
"""
