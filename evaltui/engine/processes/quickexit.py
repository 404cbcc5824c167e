"""exit_now: end a process whose work is done without the interpreter's teardown.

A normal exit joins the non-daemon threads, runs the ``atexit`` handlers, then tears the
interpreter down: every module and object is freed one by one. With numpy, pydantic and
minigrid loaded that last part takes ~0.15 s (0.11-0.22 s measured), and a run's end
waits for it twice in a row (its zygote, then the run process), and ``evaltui eval``
once more. :func:`exit_now` does the first two and the flushing of the standard
streams, then ``os._exit``: what a process wrote through closed files, ``atexit``
handlers (a fake-GPU charge released, ``logging`` flushed) and its exit code are the
same; only the freeing is skipped, which the kernel does at once.

Only for code paths that close their own files: data still buffered in an open file
object other than stdout/stderr would be lost.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from contextlib import suppress
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """Exit with ``code`` after joining threads, atexit handlers and flushing stdio."""
    main = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main and thread is not threading.current_thread() and not thread.daemon:
            thread.join()  # what the interpreter's own shutdown waits for first
    try:
        atexit._run_exitfuncs()  # the handlers a normal exit runs (they report their errors)
    finally:
        exit_forked(code)


def exit_forked(code: int) -> NoReturn:
    """Flush stdio and ``os._exit``: how a forked child (the zygote, a worker) ends, which
    must not run the ``atexit`` handlers it inherited from its parent."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):  # a closed or broken stream must not keep the process alive
            stream.flush()
    os._exit(code)
