"""Test data shipped with the repository."""

from pathlib import Path

# `kubectl cluster-info dump` of a real two-node EKS cluster (t3.small), copied from the workplace's
# shared fixtures so the suite runs from any clone. README.md inside says what it is.
EKS_T3SMALL = Path(__file__).parent / "eks-t3small"
