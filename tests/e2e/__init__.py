"""End-to-end checks with real chat frontends (not collected by pytest; each has its own ``make`` target)."""
