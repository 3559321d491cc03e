"""Fixtures for the aws test component (DESIGN §6)."""
