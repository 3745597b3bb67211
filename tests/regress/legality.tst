# Legality of `play`: occupied points, suicide of a stone and of a string, passes, either colour in any order,
# vertices in any case.
# A refused command is a failure under gogui-regress whatever its pattern, so a move that must be refused is an
# expected failure, "#? []*": the empty pattern matches only an accepted move, which shows as an unexpected PASS.
# The refusals' messages, and the refusal of what is not a vertex at all (I5, J10 and K1 on 9x9, U1 on 19x19,
# resign) or not a colour, are checked in tests/gtp/play.gtp.
boardsize 9
komi 0

# occupied points, for both colours
play black E5
1 play white E5
#? []*
2 play black E5
#? []*

# suicide of one stone in the corner
play black A2
play black B1
3 play white A1
#? []*
# filling one's own eye is legal
4 play black A1
#? []

# suicide of a two-stone string: white A9 has a liberty, white B9 would take the string's last one
play black A8
play black B8
play black C9
5 play white A9
#? []
6 play white B9
#? []*

# a pass is legal for both, any number of times, in any case
7 play black pass
#? []
8 play white PASS
#? []
9 play white Pass
#? []

# the same colour twice in a row, and colour words
10 play b C3
#? []
11 play black c4
#? []
12 play W g7
#? []
13 play white G6
#? []

# on 19x19 the last column is T and row 19 exists
boardsize 19
19 play black T19
#? []
