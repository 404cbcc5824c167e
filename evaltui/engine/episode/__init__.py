"""One episode: the loop that steps a graph, its logs and frames, its metrics."""
