"""``evaltui run``'s machinery: profiles, the port pool, and the backends it starts.

``profiles`` (profiles.yaml: what a wrapped command needs), ``ports`` (the pool and its
per-port locks), ``pidfiles`` (the backends it started) and ``backends`` (find, start
and stop them). A client of the API: it imports the API's client side, never the
scheduler or the TUI.
"""
