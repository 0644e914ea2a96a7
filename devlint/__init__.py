"""devlint: a LibCST-based linter and code-mod for PyTorch device-placement bugs."""

__version__ = "0.1.0"
