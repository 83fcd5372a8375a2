"""Reproducible comparisons of streamk with river and scikit-learn (python -m benchmarks.NAME)."""
