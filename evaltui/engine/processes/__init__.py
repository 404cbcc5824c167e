"""Child-process plumbing: start ``python -m`` children, die with the parent, exit fast."""
