"""Fixtures for the kube test component (DESIGN §6)."""
