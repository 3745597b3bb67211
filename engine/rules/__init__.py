"""The rules of Go: coordinates, the board and its strings, the game with its history, superko and scoring, random
playouts, and SGF. Imports nothing else of the engine but ``engine.config``'s neighbours: numpy and sgfmill only."""
