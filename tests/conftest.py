"""Shared by every test folder: this file's folder is put on ``sys.path`` by pytest (rootdir
conftest, prepend import mode), so tests import the helpers here (``corpora``) by name."""

import signal

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    # Started from a shell's background job (`pytest ... &`, a CI step run that way), this
    # process ignores SIGINT, and so would every command a test starts (an ignored signal
    # survives exec, and Python then installs no Ctrl-C handler): a test of Ctrl-C would
    # see the command ignore it. A handler (unlike "ignore") is reset to the default at
    # exec, so the commands get the Ctrl-C handling a user's terminal would give them.
    signal.signal(signal.SIGINT, signal.default_int_handler)
