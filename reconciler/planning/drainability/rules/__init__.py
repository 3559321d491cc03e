"""One module per drainability rule; their order is RULES in the family's root."""
