"""Shared per-file analysis that every rule reads (issue 13's semantic model).

Each module here answers one family of questions about a parsed file, computed once
before the rule traversal and read (never re-derived) by rules:

* ``devlint.facts`` still holds the prescan (aliases, evidence, guard flags, device
  variables) and the live ``ContextTracker``; new questions go in a module here.
* ``values``: what a value is (tensor, Parameter, Module, device, dtype, container) and
  where it lives (host, accelerator, follows another value); ``facts.kind_of`` delegates.
* ``syntax``: small node helpers (``dotted``, ``string_value``, ``call_arg``).
"""
