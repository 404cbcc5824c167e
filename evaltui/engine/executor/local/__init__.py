"""The local executor: K worker processes forked from a zygote on this machine."""
