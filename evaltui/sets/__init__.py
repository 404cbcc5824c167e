"""Experiment sets: a grid of runs as one unit (DESIGN §12, docs/architecture.md "Sets").

Above the scheduler and below the commands, the API and the TUI: ``expansion`` turns a
set file into member specs, ``checking`` holds them to the graphs, ``setdir`` keeps
set.json, ``targets`` reaches a scheduler (embedded or over HTTP), ``runner`` submits and
follows the members, ``table``/``stats``/``render`` make the set's table from run dirs
alone, ``watch`` queues checkpoints as training writes them, ``textplot`` draws metrics
over steps.
"""
