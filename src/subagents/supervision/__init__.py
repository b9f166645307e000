"""Supervision decisions as plain classes: admission, lifecycle, mail, policies, recovery.

Nothing here uses threads, pykka, the store, the clock or the OS: the supervisor actor feeds
``core.SupervisorCore`` one message at a time and carries out the ``Decision`` it returns;
the tests call the parts directly. docs/architecture.md maps the modules.
"""
