"""A game: the board plus what the rules need of the past — side to move, superko history, passes, prisoners, komi,
handicap, scoring — and the recent positions the network reads; the rulesets GTP can name (KataGo's spellings).

Layer: above board. ``GameState`` is changed in place by ``play``; ``copy()`` is cheap (the board copy plus one set
copy), which is how the search and the GTP undo stack keep positions.
"""
from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tabula.engine.rules.board import NO_POINT, Board, IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, RESIGN, WHITE, format_vertex

HISTORY_LENGTH = 8  # positions the network sees: the current one and 7 before it

POSITIONAL = "positional"
SITUATIONAL = "situational"
SIMPLE_KO = "simple"  # only the immediate recapture is forbidden, as GNU Go plays


AREA = "area"  # stones plus surrounded points (Tromp-Taylor, Chinese, AGA)
TERRITORY = "territory"  # surrounded points plus prisoners (Japanese, Korean)
TAX_NONE = "none"  # the empty points of a seki count like any others
TAX_SEKI = "seki"  # the empty points of a seki (its eyes included) count for nobody, as Japanese rules say
BONUS_NONE, BONUS_N, BONUS_N_MINUS_ONE = "0", "N", "N-1"  # white's handicap bonus for N handicap stones
HANDICAP_BONUSES = (BONUS_NONE, BONUS_N, BONUS_N_MINUS_ONE)


@dataclass(frozen=True)
class Rules:
    """The rules a game is played under. The default is Tromp-Taylor area scoring with positional superko, suicide
    not allowed. ``parse_rules`` gives the rulesets GTP's ``kata-set-rules`` names."""

    komi: float = 7.5
    superko: str = POSITIONAL  # positional | situational | simple
    scoring: str = AREA  # area | territory
    # seki | none; None: seki under territory scoring, none under area scoring (KataGo's defaults). dataclasses.replace
    # keeps the resolved value, as KataGo's kata-set-rule does.
    tax: str | None = None
    white_handicap_bonus: str = BONUS_NONE  # "0", "N" (Chinese) or "N-1" (AGA) points for N handicap stones
    # Whether passing before the dead stones are captured is fine (KataGo's friendlyPassOk). Tabula reports it and
    # plays the same either way: it counts as a referee removing dead stones would, and kgs-genmove_cleanup captures.
    friendly_pass_ok: bool = False
    # Whether a move may take its own string of two or more stones off (KataGo's multiStoneSuicideLegal: Tromp-Taylor,
    # New Zealand, Ing). The stones go to the opponent as prisoners. A single stone's suicide is never legal.
    suicide: bool = False

    def __post_init__(self) -> None:
        if self.superko not in (POSITIONAL, SITUATIONAL, SIMPLE_KO):
            raise ValueError(f"unknown superko rule {self.superko!r}")
        if isinstance(self.komi, bool) or not isinstance(self.komi, numbers.Real) or not math.isfinite(self.komi):
            raise ValueError(f"komi must be a finite number, not {self.komi!r}")
        if self.scoring not in (AREA, TERRITORY):
            raise ValueError(f"unknown scoring rule {self.scoring!r}")
        if self.tax is None:
            object.__setattr__(self, "tax", TAX_SEKI if self.scoring == TERRITORY else TAX_NONE)
        if self.tax not in (TAX_NONE, TAX_SEKI):
            raise ValueError(f"unknown tax rule {self.tax!r}")
        if self.white_handicap_bonus not in HANDICAP_BONUSES:
            raise ValueError(f"unknown white handicap bonus {self.white_handicap_bonus!r}")
        if not isinstance(self.friendly_pass_ok, bool):
            raise ValueError(f"friendly_pass_ok must be a bool, not {self.friendly_pass_ok!r}")
        if not isinstance(self.suicide, bool):
            raise ValueError(f"suicide must be a bool, not {self.suicide!r}")

    def handicap_bonus(self, handicap: int) -> int:
        """Points white gets for ``handicap`` stones, as KataGo counts them: none for fewer than two stones."""
        if handicap < 2 or self.white_handicap_bonus == BONUS_NONE:
            return 0
        return handicap if self.white_handicap_bonus == BONUS_N else handicap - 1

    def kata_json(self) -> str:
        """KataGo's ``kata-get-rules`` answer: its JSON object without komi, keys sorted, no spaces."""
        return json.dumps({
            "friendlyPassOk": self.friendly_pass_ok,
            "hasButton": False,
            "ko": _KO_NAMES[self.superko],
            "scoring": self.scoring.upper(),
            "suicide": self.suicide,
            "tax": str(self.tax).upper(),
            "whiteHandicapBonus": self.white_handicap_bonus,
        }, sort_keys=True, separators=(",", ":"))


class UnsupportedRulesError(ValueError):
    """Rules that Tabula does not know by that name, or knows and cannot play (button, group tax, Spight's ko)."""


_KO_NAMES = {SIMPLE_KO: "SIMPLE", POSITIONAL: "POSITIONAL", SITUATIONAL: "SITUATIONAL"}


def _spellings(*names: str) -> list[str]:
    """KataGo's spellings of a name: ``tromp-taylor`` also as tromp_taylor, tromp taylor and tromptaylor."""
    return [variant for name in names
            for variant in {name, name.replace("-", "_"), name.replace("-", " "), name.replace("-", "")}]


# KataGo's named rulesets (cpp/game/rules.cpp, parseRulesHelper) as (superko, scoring, white handicap bonus,
# friendly pass ok, multi-stone suicide).
_NAMED_RULES: dict[str, tuple[str, str, str, bool, bool]] = {}
for _names, _fields in [
    (("japanese", "korean"), (SIMPLE_KO, TERRITORY, BONUS_NONE, False, False)),
    (("chinese",), (SIMPLE_KO, AREA, BONUS_N, True, False)),
    (("chinese-ogs", "chinese-kgs"), (POSITIONAL, AREA, BONUS_N, True, False)),
    (("aga", "bga", "french"), (SITUATIONAL, AREA, BONUS_N_MINUS_ONE, True, False)),
    (("new-zealand", "nz"), (SITUATIONAL, AREA, BONUS_NONE, True, True)),
    (("tromp-taylor",), (POSITIONAL, AREA, BONUS_NONE, False, True)),
    (("goe", "ing"), (POSITIONAL, AREA, BONUS_NONE, True, True)),
]:
    for _name in _spellings(*_names):
        _NAMED_RULES[_name] = _fields
# Named by KataGo, refused here with the reason.
_REFUSED_RULES = {name: reason for names, reason in [
    (("stone-scoring", "ancient-area", "ancient-territory"), "the group tax of stone scoring is not supported"),
    (("aga-button",), "button go is not supported"),
] for name in _spellings(*names)}


def parse_rules(text: str, komi: float = 7.5) -> Rules:
    """Rules from KataGo's ``kata-set-rules`` argument, keeping ``komi`` (kata-set-rules does not change it).

    ``text``: a shorthand in any case (``japanese``, ``korean``, ``chinese``, ``chinese-ogs``, ``chinese-kgs``,
    ``aga``, ``bga``, ``french``, ``new-zealand``, ``nz``, ``tromp-taylor``, ``goe``, ``ing``; ``-`` may also be
    ``_``, a space or nothing), or a JSON object with KataGo's keys (``ko``, ``scoring`` or ``score``, ``tax``,
    ``suicide``, ``hasButton``, ``whiteHandicapBonus``, ``friendlyPassOk``), the keys left out as KataGo leaves
    them (Tromp-Taylor's, multi-stone suicide allowed, the tax following the scoring). Raises
    UnsupportedRulesError for an unknown name or key, and for what Tabula cannot play: the button, the group tax of
    stone scoring, Spight's ko rule."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return _rules_from_json(stripped, komi)
    name = stripped.lower()
    if name in _REFUSED_RULES:
        raise UnsupportedRulesError(f"{_REFUSED_RULES[name]}: {stripped}")
    if name not in _NAMED_RULES:
        raise UnsupportedRulesError(f"unknown rules {stripped!r}")
    superko, scoring, bonus, friendly, suicide = _NAMED_RULES[name]
    return Rules(komi=komi, superko=superko, scoring=scoring, white_handicap_bonus=bonus, friendly_pass_ok=friendly,
                 suicide=suicide)


def _rules_from_json(text: str, komi: float) -> Rules:
    try:
        fields = json.loads(text)
    except ValueError as error:
        raise UnsupportedRulesError(f"cannot parse rules JSON: {error}") from error
    if not isinstance(fields, dict):
        raise UnsupportedRulesError("rules JSON must be an object")
    ko_rules = {name: rule for rule, name in _KO_NAMES.items()}
    rules = Rules(komi=komi, suicide=True)  # KataGo's default for JSON rules: Tromp-Taylor's
    tax = None
    for key, value in fields.items():
        if key == "ko" and isinstance(value, str) and value.upper() in ko_rules:
            rules = replace(rules, superko=ko_rules[value.upper()])
        elif key in ("scoring", "score") and isinstance(value, str) and value.lower() in (AREA, TERRITORY):
            rules = replace(rules, scoring=value.lower())
        elif key == "tax" and isinstance(value, str) and value.lower() in (TAX_NONE, TAX_SEKI):
            tax = value.lower()
        elif key == "whiteHandicapBonus" and value in HANDICAP_BONUSES:
            rules = replace(rules, white_handicap_bonus=value)
        elif key == "friendlyPassOk" and isinstance(value, bool):
            rules = replace(rules, friendly_pass_ok=value)
        elif key == "suicide" and isinstance(value, bool):
            rules = replace(rules, suicide=value)
        elif key == "hasButton" and value is False:
            pass
        elif key == "hasButton" and value is True:
            raise UnsupportedRulesError("button go is not supported")
        elif key == "tax" and isinstance(value, str) and value.upper() == "ALL":
            raise UnsupportedRulesError("the group tax of stone scoring is not supported")
        elif key == "ko" and isinstance(value, str) and value.upper() == "SPIGHT":
            raise UnsupportedRulesError("Spight's ko rule is not supported")
        elif key == "komi":
            raise UnsupportedRulesError("komi is not a rule here: set it with the komi command")
        else:
            raise UnsupportedRulesError(f"unknown rules option {key!r}: {value!r}")
    return replace(rules, tax=tax or (TAX_SEKI if rules.scoring == TERRITORY else TAX_NONE))


def sgf_ruleset(rules: Rules) -> str:
    """The SGF RU value for ``rules``: ``Japanese`` for territory scoring, ``Chinese`` for area scoring (what
    ``scoring_from_sgf`` reads back; the ko rule and the handicap bonus are the engine's settings, not the file's).
    Rules with multi-stone suicide write a name that says so (``suicide_from_sgf``), so that a game with a suicide
    in it loads again: ``Tromp-Taylor`` for area scoring, else KataGo's JSON rules (KataGo's SGF reader takes both).
    """
    if rules.suicide:
        return "Tromp-Taylor" if rules.scoring == AREA else rules.kata_json()
    return "Japanese" if rules.scoring == TERRITORY else "Chinese"


def _rules_of_sgf(ruleset: str) -> Rules | None:
    """The rules an SGF RU value names as ``kata-set-rules`` would take it (a name or JSON), or None."""
    try:
        return parse_rules(ruleset)
    except UnsupportedRulesError:
        return None


def scoring_from_sgf(ruleset: str) -> str | None:
    """The scoring an SGF RU value names (territory for Japanese and Korean rules, area for the others Tabula
    knows), or None for a value it does not know."""
    name = ruleset.strip().lower()
    if name in ("japanese", "korean", "jp"):
        return TERRITORY
    if name in ("cn", "tt", "tromptaylor", "tromp/taylor", "goe", "ing"):
        return AREA
    named = _rules_of_sgf(ruleset)
    return None if named is None else named.scoring


def suicide_from_sgf(ruleset: str) -> bool | None:
    """Whether the rules an SGF RU value names allow multi-stone suicide, as KataGo reads them (Tromp-Taylor, NZ,
    GOE/Ing and JSON rules that do: True; Japanese, Chinese, AGA, ...: False), or None for a value it does not
    know."""
    name = ruleset.strip().lower()
    if name in ("tt", "tromp/taylor"):
        return True
    if name in ("jp", "cn"):
        return False
    named = _rules_of_sgf(ruleset)
    return None if named is None else named.suicide


# The GTP specification's fixed handicap placement, as (x, y) from the bottom-left, for 19x19; other sizes scale.
def handicap_points(size: int, count: int) -> list[int]:
    """The GTP spec's fixed placement for ``count`` stones, or ValueError where the spec defines none."""
    if count < 2 or count > 9:
        raise ValueError("invalid handicap")
    if size < 7 or (size % 2 == 0 and count > 4) or (size == 7 and count > 4):
        raise ValueError(f"no fixed placement of {count} stones on {size}x{size}")
    edge = 2 if size <= 12 else 3
    low, mid, high = edge, size // 2, size - 1 - edge
    corners = [(high, high), (low, low), (low, high), (high, low)]  # upper right, lower left, upper left, lower right
    sides = [(low, mid), (high, mid)]  # left, right
    vertical = [(mid, high), (mid, low)]  # top, bottom
    center = (mid, mid)
    if count <= 4:
        chosen = corners[:count]
    elif count == 5:
        chosen = corners + [center]
    elif count == 6:
        chosen = corners + sides
    elif count == 7:
        chosen = corners + sides + [center]
    elif count == 8:
        chosen = corners + sides + vertical
    else:
        chosen = corners + sides + vertical + [center]
    return [y * size + x for x, y in chosen]


def format_result(score: float) -> str:
    """The SGF/GTP result for black's margin ``score`` (komi included): ``B+3.5``, ``W+0.5`` or ``0``."""
    if score > 0:
        return f"B+{score:g}"
    if score < 0:
        return f"W+{-score:g}"
    return "0"


class GameState:
    """One position of a game and the history the rules and the network need.

    Fields that change with every move: ``board``, ``to_move``, ``moves``, ``passes``, ``recent``, ``seen`` and
    ``prisoners``. ``rules`` and ``handicap`` are fixed for the game (``replayed`` plays it again under other rules).
    """

    __slots__ = ("board", "to_move", "rules", "moves", "passes", "recent", "seen", "handicap", "setup", "stones",
                 "peak_stones", "prisoners")

    def __init__(self, size: int = 19, rules: Rules | None = None):
        self.board = Board(size)
        self.rules = rules or Rules()
        self.to_move = BLACK
        self.moves: list[tuple[int, int]] = []  # (colour, move) played since the setup
        self.setup: list[tuple[int, int]] = []  # (colour, point) stones placed outside of play
        self.handicap = 0
        self.passes = 0  # consecutive passes at the end of the move list
        # Padded colours of the previous positions (immutable snapshots), newest first, at most HISTORY_LENGTH - 1.
        self.recent: tuple[bytes, ...] = ()
        self.seen: set[int] = {self._superko_key(self.board.hash, BLACK)}
        # Stones on the board, and the most there were in any position of ``seen``: a move that captures nothing
        # adds a stone, so it can repeat a position only if some earlier one had more stones than there are now.
        self.stones = 0
        self.peak_stones = 0
        # Stones captured in play by (black, white): the prisoners that territory scoring counts. A tuple, so that
        # copies share it until the next capture.
        self.prisoners: tuple[int, int] = (0, 0)

    @property
    def size(self) -> int:
        return self.board.geometry.size

    def copy(self) -> "GameState":
        other = GameState.__new__(GameState)
        other.board = self.board.copy()
        other.rules = self.rules
        other.to_move = self.to_move
        other.moves = self.moves[:]
        other.setup = self.setup[:]
        other.handicap = self.handicap
        other.passes = self.passes
        other.recent = self.recent
        other.seen = set(self.seen)
        other.stones = self.stones
        other.peak_stones = self.peak_stones
        other.prisoners = self.prisoners
        return other

    def with_to_move(self, color: int) -> "GameState":
        """This position with ``color`` to move: itself when it already is, else a copy (GTP may ask either colour
        to move, whoever moved last)."""
        if self.to_move == color:
            return self
        other = self.copy()
        other.to_move = color
        return other

    def without_stones(self, points: Sequence[int]) -> "GameState":
        """A position with the stones on ``points`` taken off (dead stones a referee removes), for counting only:
        same size, rules, handicap, prisoners and side to move, the other stones as setup, no history."""
        counted = GameState(self.size, self.rules)
        removed = set(points)
        board = self.board
        for flat, pad in enumerate(board.geometry.padded):
            color = board.color[pad]
            if color in (BLACK, WHITE) and flat not in removed:
                # Every string keeps at least the liberties it has here, so no placement captures or is suicide.
                counted.place_setup(flat, color)
        counted.to_move = self.to_move
        counted.handicap = self.handicap
        counted.prisoners = self.prisoners
        return counted

    def _superko_key(self, stone_hash: int, to_move: int) -> int:
        if self.rules.superko == SITUATIONAL and to_move == WHITE:
            return stone_hash ^ self.board.geometry.zobrist_white_to_move
        return stone_hash

    @property
    def hash(self) -> int:
        """Identifies the position for the transposition table: stones, side to move and ko point."""
        geometry = self.board.geometry
        key = self.board.hash ^ geometry.zobrist_ko[self.board.ko]
        return key ^ geometry.zobrist_white_to_move if self.to_move == WHITE else key

    def is_game_over(self) -> bool:
        return self.passes >= 2

    # -- moves ---------------------------------------------------------------------------------------------------

    def play(self, move: int, color: int | None = None) -> list[int]:
        """Play ``move`` for ``color`` (default: the side to move) and return the flat points whose stones came off:
        the captured ones, or after a multi-stone suicide (``Rules.suicide``) the mover's own string, the played
        point included (its stones are the opponent's prisoners).

        Raises IllegalMoveError (occupied, suicide, ko, superko) and leaves the state unchanged.
        """
        if color is None:
            color = self.to_move
        if move == RESIGN:
            raise IllegalMoveError("resign is not a move")
        board = self.board
        if move == PASS:
            captured_flat: list[int] = []
            board.ko = NO_POINT
            self.passes += 1
        else:
            # The search replays every move of every descent through here: geometry and history are inlined.
            geometry = board.geometry
            padded = geometry.padded
            if not (0 <= move < len(padded)):
                raise IllegalMoveError("off board")
            point = padded[move]
            new_hash, captured_roots = board.try_play(point, color, self.rules.suicide)
            superko = self.rules.superko
            if superko == SIMPLE_KO:
                key = None
            else:
                key = new_hash ^ geometry.zobrist_white_to_move if superko == SITUATIONAL and color == BLACK \
                    else new_hash  # as _superko_key(new_hash, 3 - color)
                if key in self.seen:
                    raise IllegalMoveError("superko")
            self.recent = (bytes(board.color),) + self.recent[: HISTORY_LENGTH - 2]  # as _push_history()
            flat = geometry.flat
            captured_flat = [flat[p] for p in board._commit(point, color, new_hash, captured_roots)]
            if key is not None:
                self.seen.add(key)
            self.stones += 1 - len(captured_flat)
            if captured_flat:
                # Stones captured by black: white's, or after black's suicide black's own (and the other way round).
                by_black = (color == BLACK) == (board.color[point] != EMPTY)
                black, white = self.prisoners
                self.prisoners = (black + len(captured_flat), white) if by_black \
                    else (black, white + len(captured_flat))
            if self.stones > self.peak_stones:
                self.peak_stones = self.stones
            self.passes = 0
        if move == PASS:
            self._push_history()
            if self.rules.superko == SITUATIONAL:
                self.seen.add(self._superko_key(board.hash, 3 - color))
        self.moves.append((color, move))
        self.to_move = 3 - color
        return captured_flat

    def _push_history(self) -> None:
        self.recent = (bytes(self.board.color),) + self.recent[: HISTORY_LENGTH - 2]

    def legal(self, move: int, color: int | None = None) -> bool:
        if move == PASS:
            return True
        try:
            self.check(move, color)
        except IllegalMoveError:
            return False
        return True

    def check(self, move: int, color: int | None = None) -> None:
        """Raise IllegalMoveError if ``move`` is not legal for ``color`` now."""
        if color is None:
            color = self.to_move
        if move == PASS:
            return
        if not (0 <= move < self.size * self.size):
            raise IllegalMoveError("off board")
        new_hash, _ = self.board.try_play(self.board.geometry.padded[move], color, self.rules.suicide)
        if self.rules.superko != SIMPLE_KO and self._superko_key(new_hash, 3 - color) in self.seen:
            raise IllegalMoveError("superko")

    def legal_moves(self, color: int | None = None) -> list[int]:
        """Every legal point for ``color`` (flat), pass not included."""
        return np.flatnonzero(self.legal_mask(color)[:-1]).tolist()

    def legal_mask(self, color: int | None = None) -> np.ndarray:
        """bool [N*N+1]: the legal points for ``color`` (default: the side to move), and pass (always legal)."""
        return legal_masks([self], None if color is None else [color])[0]

    def place_handicap(self, points: list[int]) -> None:
        """Put black handicap stones on an empty board; white moves next."""
        if self.moves or self.setup:
            raise ValueError("board not empty")
        if len(points) < 2 or len(set(points)) != len(points):
            raise ValueError("bad handicap")
        self.to_move = WHITE
        for point in points:
            self.place_setup(point, BLACK)
        self.handicap = len(points)

    def place_setup(self, point: int, color: int) -> None:
        """A stone placed outside of play (handicap, SGF AB/AW). It starts the history afresh."""
        if not (0 <= point < self.size * self.size):
            raise IllegalMoveError("off board")
        self.board.place_setup_stone(self.board.geometry.padded[point], color)
        self.setup.append((color, point))
        self.seen = {self._superko_key(self.board.hash, self.to_move)}
        self.stones += 1
        self.peak_stones = self.stones
        self.recent = ()

    # -- reading the position --------------------------------------------------------------------------------------

    def color_at(self, point: int) -> int:
        return self.board.color[self.board.geometry.padded[point]]

    @property
    def counted_komi(self) -> float:
        """What the count gives white beyond the board: komi plus the rules' handicap bonus for this game's
        handicap stones (``Rules.handicap_bonus``; none under the default rules)."""
        return self.rules.komi + self.rules.handicap_bonus(self.handicap)

    def area_score(self) -> float:
        """Tromp-Taylor score from black's view, komi (``counted_komi``) included: positive means black wins. The
        search and self-play count by this whatever the rules; ``score`` counts as the rules say."""
        black, white = self.board.area_score()
        return black - white - self.counted_komi

    def score(self, dead: Iterable[int] = (), seki: Iterable[int] = ()) -> float:
        """The count under ``rules`` from black's view, ``counted_komi`` included: positive means black wins.

        ``dead``: flat points of the stones a referee takes off (judged by the caller, engine.play.judging).
        ``seki``: flat points of the live stones in seki (judged by the caller, engine.rules.playout.seki_stones).
        Area scoring: stones plus the empty regions that reach one colour only. Territory scoring: those empty
        regions (the points of the dead stones included) plus prisoners, the stones captured in play and the dead
        stones taken off. With the seki tax (Japanese rules: the default under territory scoring) an empty region
        that touches a stone in seki counts for nobody: the eyes of a group in seki are not territory. That is an
        approximation of the Japanese rules' wording (which also asks whether an eye could be filled), sound for
        the usual seki shapes: eyes and shared liberties of the strings in seki."""
        dead_points = sorted(set(dead))
        counted = self.without_stones(dead_points) if dead_points else self
        board = counted.board
        owners = board.area_owners()
        if self.rules.tax == TAX_SEKI:
            for pad in _regions_touching(board, [board.geometry.padded[p] for p in seki]):
                owners[pad] = EMPTY
        if self.rules.scoring == AREA:
            return owners.count(BLACK) - owners.count(WHITE) - self.counted_komi
        color = board.color
        black_area = sum(1 for pad in board.geometry.padded if owners[pad] == BLACK and color[pad] == EMPTY)
        white_area = sum(1 for pad in board.geometry.padded if owners[pad] == WHITE and color[pad] == EMPTY)
        dead_white = sum(1 for p in dead_points if self.color_at(p) == WHITE)
        dead_black = sum(1 for p in dead_points if self.color_at(p) == BLACK)
        black_prisoners, white_prisoners = self.prisoners
        return (black_area + black_prisoners + dead_white) - (white_area + white_prisoners + dead_black) \
            - self.counted_komi

    def replayed(self, rules: Rules, keep: Iterable[int] = ()) -> tuple["GameState", dict[int, "GameState"]]:
        """This game played again from its setup stones under ``rules`` (another ko rule rebuilds the superko
        history): the position now, and copies of the positions after each number of moves in ``keep``.

        Raises ValueError, naming the move, where a move breaks the new rules."""
        kept = set(keep)
        state = GameState(self.size, rules)
        state.to_move = self.moves[0][0] if self.moves else self.to_move  # the superko key of the first position
        for color, point in self.setup:
            state.place_setup(point, color)
        state.handicap = self.handicap
        copies: dict[int, GameState] = {}
        for number, (color, move) in enumerate(self.moves):
            if number in kept:
                copies[number] = state.copy()
            try:
                state.play(move, color)
            except IllegalMoveError as error:
                rule = "suicide rule" if error.reason == "suicide" else f"{rules.superko} ko rule"
                raise ValueError(f"move {number + 1} is illegal under the {rule} ({error.reason})") from error
        if len(self.moves) in kept:
            copies[len(self.moves)] = state.copy()
        state.to_move = self.to_move
        return state, copies

    def result_string(self) -> str:
        """The SGF/GTP result of counting this position now, e.g. ``B+3.5`` or ``0``."""
        return format_result(self.area_score())

    def history_colors(self, age: int) -> bytes | bytearray | None:
        """Padded colours of the position ``age`` moves ago (0 = now), or None before the game's start."""
        if age == 0:
            return self.board.color
        if age - 1 < len(self.recent):
            return self.recent[age - 1]
        return None

    def last_move(self) -> int | None:
        return self.moves[-1][1] if self.moves else None

    def __str__(self) -> str:
        size = self.size
        header = "   " + " ".join("ABCDEFGHJKLMNOPQRSTUVWXYZ"[:size])
        lines = [header]
        rows = self.board.to_ascii().split("\n")
        for i, row in enumerate(rows):
            number = size - i
            lines.append(f"{number:2d} {row} {number:2d}")
        lines.append(header)
        moved = f", last {format_vertex(self.moves[-1][1], size)}" if self.moves else ""
        lines.append(f"{'Black' if self.to_move == BLACK else 'White'} to move{moved}, komi {self.rules.komi:g}")
        return "\n".join(lines)

    # -- the game interface (engine.rules.interface.Game and its optional hooks) --------------------------------

    INPUT_ENCODING = "leelaz-18"  # Leela Zero's 18 planes (engine.net.features)

    @property
    def policy_size(self) -> int:
        """The points, then the pass: N*N+1."""
        size = self.board.geometry.size
        return size * size + 1

    def terminal_value(self) -> float | None:
        """None until two passes in a row end the game; then the Tromp-Taylor count's result, side to move's view
        (+1, -1, or 0 for a tie), as the search scores a game it plays to the end."""
        if self.passes < 2:
            return None
        score = self.terminal_score()
        return 1.0 if score > 0 else -1.0 if score < 0 else 0.0

    def terminal_score(self) -> float:
        """The Tromp-Taylor margin in points, side to move's view."""
        return self.area_score() * (1.0 if self.to_move == BLACK else -1.0)

    @staticmethod
    def own_eye_masks(states: Sequence["GameState"]) -> np.ndarray:
        """bool [B, N*N]: the points that fill the mover's own single-point eye (``board.own_eye_masks``)."""
        from tabula.engine.rules.board import own_eye_masks

        return own_eye_masks([state.board for state in states], [state.to_move for state in states])

    @staticmethod
    def atari_stakes(states: Sequence["GameState"]) -> np.ndarray:
        """int32 [B, N*N]: the stones of the strings in atari whose only liberty each point is (``board.atari_stakes``):
        what a move there captures or gives a liberty."""
        from tabula.engine.rules.board import atari_stakes

        return atari_stakes([state.board for state in states])

    @staticmethod
    def legal_masks(states: Sequence["GameState"]) -> np.ndarray:
        """bool [B, N*N+1]: ``legal_mask`` of many positions at once (the module's ``legal_masks``)."""
        return legal_masks(states)


def _regions_touching(board: Board, stones: Sequence[int]) -> list[int]:
    """Padded points of the empty regions that touch any of the padded ``stones``."""
    color = board.color
    neighbors = board.geometry.neighbors
    seen: set[int] = set()
    stack = [n for pad in stones for n in neighbors[pad] if color[n] == EMPTY]
    while stack:
        point = stack.pop()
        if point in seen:
            continue
        seen.add(point)
        stack.extend(n for n in neighbors[point] if color[n] == EMPTY and n not in seen)
    return sorted(seen)


def legal_masks(states: Sequence[GameState], colors: Sequence[int] | None = None) -> np.ndarray:
    """bool [B, N*N+1]: each state's legal points for its colour (default: its side to move), and pass (always legal).

    The search calls this for every batch of leaves (states of one board size), so most points are decided in numpy
    for the whole batch at once: an empty point with an empty neighbour is legal unless it captures (then the rules
    are played out in Python) or repeats a position (one Zobrist key away from the current hash when it captures
    nothing, and only possible when an earlier position had more stones than this one). A point without an empty
    neighbour (a suicide among them: multi-stone suicide is legal where the rules say) is played out in Python.
    """
    count = len(states)
    if colors is None:
        colors = [state.to_move for state in states]
    geometry = states[0].board.geometry
    size = geometry.size
    width = geometry.width
    grid = np.frombuffer(b"".join([state.board.color for state in states]), dtype=np.int8).reshape(count, -1)
    empty = grid == EMPTY  # padded; the border is never empty
    # Points with an empty neighbour, by shifting the padded grid (neighbours are ±1 and ±width; the border rows
    # and the shared border column keep the shifts from reaching across an edge).
    free = np.zeros_like(empty)
    free[:, width:-width] = empty[:, :-2 * width] | empty[:, 2 * width:] | empty[:, width - 1:-width - 1] \
        | empty[:, width + 1:-width + 1]
    padded_index = geometry.padded_array
    points = empty[:, padded_index]
    easy = points & free[:, padded_index]
    flat = geometry.flat
    for row, (state, color) in enumerate(zip(states, colors)):
        board = state.board
        board_color = board.color
        other = 3 - color
        # Points that capture: the lone liberty of each opponent string in atari.
        capturing = [flat[next(iter(libs))] for root, libs in board.liberties.items()
                     if len(libs) == 1 and board_color[root] == other]
        if capturing:
            easy[row, capturing] = False
        if board.ko_color == color and board.ko != NO_POINT:
            points[row, flat[board.ko]] = False
            easy[row, flat[board.ko]] = False
    masks = np.zeros((count, size * size + 1), dtype=bool)
    masks[:, -1] = True
    masks[:, :-1] = easy
    for row, (state, color) in enumerate(zip(states, colors)):
        superko = state.rules.superko
        if superko != SIMPLE_KO and len(state.seen) > 1 and state.peak_stones > state.stones:
            key = state._superko_key(state.board.hash, 3 - color)
            candidates = np.flatnonzero(easy[row])
            after = geometry.zobrist_array[color][candidates] ^ np.uint64(key)
            seen = np.sort(np.fromiter(state.seen, dtype=np.uint64, count=len(state.seen)))
            found = np.searchsorted(seen, after).clip(max=len(seen) - 1)  # np.isin costs 5x more here
            masks[row, candidates[seen[found] == after]] = False
    padded = geometry.padded
    rows, hard = np.nonzero(points & ~easy)
    for row, point in zip(rows.tolist(), hard.tolist()):
        state = states[row]
        color = colors[row]
        try:
            new_hash, _ = state.board.try_play(padded[point], color, state.rules.suicide)
        except IllegalMoveError:
            continue
        if state.rules.superko != SIMPLE_KO and state._superko_key(new_hash, 3 - color) in state.seen:
            continue
        masks[row, point] = True
    return masks


__all__ = ["GameState", "Rules", "IllegalMoveError", "UnsupportedRulesError", "format_result", "handicap_points",
           "legal_masks", "parse_rules", "sgf_ruleset", "scoring_from_sgf", "suicide_from_sgf", "HISTORY_LENGTH",
           "POSITIONAL", "SITUATIONAL", "SIMPLE_KO", "EMPTY", "AREA", "TERRITORY", "TAX_NONE", "TAX_SEKI", "BONUS_NONE",
           "BONUS_N", "BONUS_N_MINUS_ONE", "HANDICAP_BONUSES"]
