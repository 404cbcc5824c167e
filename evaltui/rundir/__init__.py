"""Run-dir I/O: layout and run ids, atomic JSON, status derivation, symlink-safe opening, log
and frame readers, disk-full handling, file polling, and the one record store.
"""
