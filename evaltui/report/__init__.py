"""``evaltui report``: a run as a static site (no server, nothing fetched; opens from file://)."""
