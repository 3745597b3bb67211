"""Training data: game records read from archives, compact shards and their sampler, the self-play replay window.
Imports ``engine.rules`` and ``engine.net`` (features), never ``engine.play``."""
