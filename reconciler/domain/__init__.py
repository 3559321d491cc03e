"""The domain: the nouns every layer shares (resources, nodes, pods, groups, inventory, quantities,
durations, windows, errors). Pure: no I/O, no clock, nothing from the edges."""
