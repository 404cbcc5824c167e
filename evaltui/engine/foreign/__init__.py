"""A nodeset in its own Python environment (DESIGN §13): its interpreter, built and cached
environments, the wire across, and the host that runs inside the other interpreter."""
