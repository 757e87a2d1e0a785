"""End-to-end tests with the real Claude Code CLI (a package, so its conftest does not shadow tests/conftest.py)."""
