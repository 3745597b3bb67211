# Scoring: area (Tromp-Taylor) with komi, counted on positions where every string has two single-point eyes, so
# that no judgement of dead stones is involved. Captured stones do not count under area scoring.
boardsize 9
komi 7.5
1 final_score
#? [W\+7\.5]
komi 0
2 final_score
#? [0]
3 final_status_list dead
#? []

# 5x5: black owns columns A-B (7 stones, eyes A1 A3 A5), white C-E (12 stones, eyes D1 D3 D5): white by 5 points.
# White's stone at A3 is captured on the way: it changes nothing in the count.
boardsize 5
komi 0.5
play black A2
play black B1
play black B2
play black B3
play black B4
play black B5
play white A3
play black A4
play white C1
play white C2
play white C3
play white C4
play white C5
play white D4
play white D2
play white E1
play white E2
play white E3
play white E4
play white E5
4 final_score
#? [W\+5\.5]
5 final_status_list dead
#? []
# a multi-line reply: one string a line, black's, then white's
6 final_status_list alive
#? [B1 A2 B2 B3 A4 B4 B5\nC1 E1 C2 D2 E2 C3 E3 C4 D4 E4 C5 E5]
komi -5
7 final_score
#? [0]
komi -7.5
8 final_score
#? [B\+2\.5]
komi 2
9 final_score
#? [W\+7]
