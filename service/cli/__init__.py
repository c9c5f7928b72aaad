"""The ``brokergate`` command and its console tools.

``main`` parses the command line (``main.py``: ``serve``, ``users``, ``worker``); ``tools`` puts
the console tools' parsers together and runs them: ``topics``, ``produce``, ``consume``,
``groups``, ``acls``, ``schemas`` and ``shares``, over the flags and connection they share
(``common``) and the record text they read and print (``records``).
"""

from .main import main

__all__ = ["main"]
