"""The scaling projection: a fitted curve over a sweep of client counts, and what it can say
about the profile's full node count (never a qualification)."""
