"""devlint's rules, one module per rule (installed as ``devlint.rules``)."""
