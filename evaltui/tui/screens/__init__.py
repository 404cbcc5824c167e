"""One module per screen: queue, run, replay, and the submit/confirm/go-to/help dialogs."""
