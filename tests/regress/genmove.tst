# genmove sanity for any move generator: a legal move on the board, never an occupied point, never suicide; pass
# when nothing but one's own eyes is left. Written so that the random player passes too.
# GTP answers are case-insensitive, gogui-regress's patterns are not: "(?i)" lets "PASS" (GNU Go's) match "pass".
boardsize 9
komi 7.5

1 genmove black
#? [(?i)[A-HJ][1-9]]
2 genmove white
#? [!(?i)pass|resign]
# either colour may be asked to move, whoever is to move
clear_board
play black E5
3 genmove black
#? [!(?i)E5|pass|resign]
4 reg_genmove white
#? [(?i)[A-HJ][1-9]|pass]

# 3x3 with black everywhere but its two eyes A1 and C3: neither side has a sensible legal move
boardsize 3
play black B1
play black C1
play black A2
play black B2
play black C2
play black A3
play black B3
5 genmove white
#? [(?i)pass|resign]
6 genmove black
#? [(?i)pass]
7 reg_genmove black
#? [(?i)pass]

# 3x3 with black around A1 and the open pair B3-C3: white's only legal moves are B3 and C3 (A1 is suicide)
clear_board
play black B1
play black C1
play black A2
play black B2
play black C2
play black A3
8 genmove white
#? [(?i)B3|C3|pass|resign]
# black's only move that does not fill its own eye at A1 captures white's stone (or black passes)
9 genmove black
#? [(?i)B3|C3|pass]

# kgs-genmove_cleanup answers a legal move or pass, like genmove
boardsize 9
clear_board
10 kgs-genmove_cleanup black
#? [(?i)[A-HJ][1-9]|pass]
