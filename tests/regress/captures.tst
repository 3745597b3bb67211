# Captures: a stone or string with no liberties left is removed, and its points are empty again (a play there is
# accepted). Corner, edge and centre stones, a two-stone string, two strings taken by one move that has no
# liberty of its own, and a snapback.
# A refused command is a failure under gogui-regress whatever its pattern, so a move that must be refused is an
# expected failure, "#? []*": the empty pattern matches only an accepted move, which shows as an unexpected PASS.
# The refusal's message is checked in tests/gtp/play.gtp.
boardsize 9
komi 0

# a corner stone
play white A1
play black A2
play black B1
1 play black A1
#? []

# an edge stone
clear_board
play white E1
play black D1
play black F1
play black E2
2 play black E1
#? []

# a centre stone: white cannot play back into the hole (suicide), black can
clear_board
play white E5
play black D5
play black F5
play black E4
play black E6
3 play white E5
#? []*
4 play black E5
#? []

# a two-stone string on the edge
clear_board
play white D1
play white E1
play black C1
play black F1
play black D2
play black E2
5 play black D1
#? []
6 play black E1
#? []

# one move with no liberty of its own takes two strings at once, which makes it legal
clear_board
play white A2
play white B1
play black A3
play black B2
play black C1
7 play black A1
#? []
8 play black A2
#? []
9 play black B1
#? []

# a snapback: black throws in at B1, white takes it at A1, black takes five stones back at B1
clear_board
play black A3
play black B3
play black C3
play black D3
play black D2
play black D1
play white A2
play white B2
play white C2
play white C1
10 play black B1
#? []
11 play white A1
#? []
12 play black B1
#? []
13 play black A2
#? []
14 play black C2
#? []
15 play black A1
#? []
