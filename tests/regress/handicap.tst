# Handicap: the GTP spec's fixed placements, free placement, the stones occupy their points. The spec does not fix
# the order in which the stones are listed: the patterns accept any.
# A refused command is a failure under gogui-regress whatever its pattern, so a move onto a handicap stone, which
# must be refused, is an expected failure, "#? []*": the empty pattern matches only an accepted move, which shows
# as an unexpected PASS. The refusals' messages, and the refused handicap commands (a board not empty, a number of
# stones the board has no placement for, a bad vertex list) with the board they leave as it was, are checked in
# tests/gtp/handicap.gtp.
boardsize 9
1 fixed_handicap 2
#? [G7 C3|C3 G7]
2 play white C3
#? []*
4 genmove white
#? [!(?i)C3|G7|pass|resign]

clear_board
5 fixed_handicap 5
#? [(C3|G7|C7|G3|E5)( (C3|G7|C7|G3|E5)){4}]
clear_board
6 fixed_handicap 9
#? [(C3|G7|C7|G3|C5|G5|E7|E3|E5)( (C3|G7|C7|G3|C5|G5|E7|E3|E5)){8}]

boardsize 19
9 fixed_handicap 4
#? [(D4|Q16|D16|Q4)( (D4|Q16|D16|Q4)){3}]

clear_board
10 place_free_handicap 4
#? [([A-HJ-T](1[0-9]|[1-9]) ){3}[A-HJ-T](1[0-9]|[1-9])]

clear_board
14 set_free_handicap A1 T19 K10
#? []
15 play white T19
#? []*
16 play white K11
#? []

# 7x7 has a fixed placement for four stones (and none for five)
boardsize 7
18 fixed_handicap 4
#? [(C3|E5|C5|E3)( (C3|E5|C5|E3)){3}]
