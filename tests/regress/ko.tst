# Simple ko: the immediate retake is forbidden, a move elsewhere lifts the ban, and the ban binds only the colour
# whose stone was just captured.
# A refused command is a failure under gogui-regress whatever its pattern, so a retake that must be refused is an
# expected failure, "#? []*": the empty pattern matches only an accepted move, which shows as an unexpected PASS.
# The refusals' message is checked in tests/gtp/play.gtp.
boardsize 9
komi 0
play black B4
play white C4
play black A3
play white B3
play white D3
play black B2
play white C2

# black takes the ko at C3, capturing B3
1 play black C3
#? []
2 play white B3
#? []*
# a threat and its answer elsewhere, then the retake is legal
3 play white E5
#? []
play black E1
4 play white B3
#? []
# now black may not retake at once
5 play black C3
#? []*
# but white may fill the ko
6 play white C3
#? []

# the ban binds only the captured colour: after black takes, black itself may fill B3
clear_board
play black B4
play white C4
play black A3
play white B3
play white D3
play black B2
play white C2
7 play black C3
#? []
8 play black B3
#? []
