"""The HTTP API of a scheduler (DESIGN §7) and its client.

Server side: ``app.make_api(scheduler, token)`` builds the FastAPI app (routes in
``runs``, ``resources``, ``admits``; server-sent events in ``events``),
``server.ApiServer`` serves it with uvicorn, and ``backend_start.start_backend`` wires
both with the admit queue for ``evaltui serve`` and the TUI. Client side:
``client.ApiClient`` (typed calls returning the ``models``) and ``auth`` (the token).
``evaltui run``'s port pool and profiles live in ``evaltui.wrapper``.

Nothing is imported here, so a client never pays for FastAPI or the scheduler. The
server imports the scheduler, never the TUI; the engine never imports the API.
"""
