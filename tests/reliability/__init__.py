"""Reliability, abuse and privacy tests that report figures (see docs/reliability.md)."""
