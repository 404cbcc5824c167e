"""Built-in nodesets that are not a benchmark: clients of policies served elsewhere.

``openpi.WebsocketPolicy`` speaks openpi's websocket dialect, ``rest.JsonNumpyPolicy``
OpenVLA's ``POST /act`` (DESIGN §13, docs/policy-servers.md). They are engine-level code:
they import the engine and never the scheduler, the API or the TUI.
"""
