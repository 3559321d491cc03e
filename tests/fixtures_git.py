"""Fixtures for the git test component (DESIGN §6)."""
