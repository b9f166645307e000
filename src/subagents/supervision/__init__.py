"""Supervision decisions as plain classes: limits, admission, concurrency slots, the run tree.

Nothing here uses threads or pykka: the supervisor actor calls these from its one thread, and
the tests call them directly.
"""
