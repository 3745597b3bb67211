# Positional superko (the default rule): no move may recreate any earlier position, whatever the side to move.
# A refused command is a failure under gogui-regress whatever its pattern, so a move that must be refused is an
# expected failure, "#? []*": the empty pattern matches only an accepted move, which shows as an unexpected PASS.
# The refusals' message is checked in tests/gtp/play.gtp.

# A 16-move cycle on 4x4 found by a random search: white's A2 at the end would recreate the position after move 13.
boardsize 4
komi 0
play black B2
play white A2
play black D2
play white C4
play black C2
play white D1
play black D3
play white D4
play black C3
play white B4
play black A4
play white B1
play black B3
play white A3
play black A1
1 play white A2
#? []*
# any other move is fine
2 play white pass
#? []

# A ko retake after two passes recreates the position before the ko was taken: still forbidden.
boardsize 9
play black B4
play white C4
play black A3
play white B3
play white D3
play black B2
play white C2
play black C3
play white pass
play black pass
3 play white B3
#? []*
# after a real move elsewhere the position is new, and the retake is legal
play white E5
play black E1
4 play white B3
#? []
