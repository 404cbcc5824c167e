"""What runs a run's episodes: the executor protocol and the dealing core every executor shares."""
