"""The HTTP API of a scheduler (DESIGN §7), its client, and what ``evaltui run`` needs.

Server side: ``app.make_api(scheduler, token)`` builds the FastAPI app (routes in
``runs``, ``resources``, ``admits``; server-sent events in ``events``) and
``server.ApiServer`` serves it with uvicorn. Client side: ``client.ApiClient`` (typed
calls returning the ``models``), ``profiles`` (profiles.yaml) and ``backends`` (the port
pool of backends ``evaltui run`` starts). Nothing is imported here, so a client never
pays for FastAPI. The API imports the scheduler, never the TUI; the engine never imports
the API.
"""
