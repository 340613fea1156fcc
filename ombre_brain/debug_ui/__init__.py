"""The debug UI: pages for people and JSON routes, showing `layer_debug` and `runtime_gate` for every memory.

``debug_views`` turns a Turn into the debug shapes (pure: nothing is scored or gated again);
``api_debug`` serves them as JSON; ``pages`` renders the same dicts as HTML.
"""
