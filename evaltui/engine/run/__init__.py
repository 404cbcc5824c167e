"""One run: the runner that fills a run dir, its summary, the run process's intake."""
