"""The per-file semantic model every rule reads: one module per family of questions
(values, guards, calls, loops, transfers, usage, checkpoints, dataflow ...), each answered
once per file from the CST and never re-derived by a rule. ``devlint.facts`` builds the
prescan and delegates to these modules. The table of modules and where a new question
goes: docs/DEVELOPING.md, "The analysis model".
"""
