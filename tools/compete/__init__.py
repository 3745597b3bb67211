"""Engines against each other: the GTP client, matches with a referee and SGF, Elo."""
