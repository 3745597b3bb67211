"""Making networks: prepare, train, eval, plot, export, selfplay, rl."""
