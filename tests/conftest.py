"""Shared by every test folder: this file's folder is put on ``sys.path`` by pytest (rootdir
conftest, prepend import mode), so tests import the helpers here (``corpora``) by name."""
