"""Playing: the PUCT search, the one decision that turns its result into a move, the search as a move picker,
clocks, and the player that GTP drives. Imports ``engine.rules`` and ``engine.net``."""
