"""The ``brokergate`` command and its console tools: ``main`` parses the command line (``main.py``);
the tools are ``tools`` (topics, produce, consume, groups), ``acls``, ``schemas`` and ``shares``,
over the flags and connection they share (``common``)."""

from .main import main

__all__ = ["main"]
