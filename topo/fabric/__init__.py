"""Spec -> fabric: builders, failures, bisection, inventory, export."""
