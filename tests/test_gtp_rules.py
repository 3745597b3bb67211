"""The rules over GTP: KataGo's kata-set-rules, kata-set-rule and kata-get-rules, kgsGtp's kgs-rules, final_score
under each scoring, and the SGF RU property through loadsgf and printsgf."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_session

DEFAULT_RULES = ('{"friendlyPassOk":false,"hasButton":false,"ko":"POSITIONAL","scoring":"AREA","suicide":false,'
                 '"tax":"NONE","whiteHandicapBonus":"0"}')
JAPANESE_RULES = ('{"friendlyPassOk":false,"hasButton":false,"ko":"SIMPLE","scoring":"TERRITORY","suicide":false,'
                  '"tax":"SEKI","whiteHandicapBonus":"0"}')


def reply(session, line: str) -> str:
    return session.dispatch(line).rstrip("\n")


def rules_of(session) -> dict:
    answer = reply(session, "kata-get-rules")
    assert answer.startswith("= ")
    return json.loads(answer[2:])


def test_the_rules_commands_are_listed():
    session = make_session()
    listed = reply(session, "list_commands").split("\n")
    for name in ("kata-set-rules", "kata-set-rule", "kata-get-rules", "kgs-rules"):
        assert name in listed or "= " + name in listed
        assert reply(session, f"known_command {name}") == "= true"


def test_kata_get_rules_by_default_and_after_japanese():
    session = make_session()
    assert reply(session, "kata-get-rules") == "= " + DEFAULT_RULES
    assert reply(session, "kata-set-rules japanese") == "="
    assert reply(session, "kata-get-rules") == "= " + JAPANESE_RULES
    assert reply(session, "kata-get-rules extra") == "? syntax error"


@pytest.mark.parametrize("line", [
    "kata-set-rules frobnicate", "kata-set-rules stone-scoring", "kata-set-rules aga-button",
    'kata-set-rules {"suicide": 1}', 'kata-set-rules {"komi": 6.5}', 'kata-set-rules {"ko": "SIMPLE"',
    "kata-set-rules", "kgs-rules korean", "kgs-rules", "kgs-rules japanese extra", "kata-set-rule ko SPIGHT",
    "kata-set-rule tax ALL", "kata-set-rule hasButton true", "kata-set-rule suicide perhaps", "kata-set-rule komi 5",
    "kata-set-rule ko",
])
def test_bad_rules_are_refused_and_change_nothing(line):
    session = make_session()
    reply(session, "kata-set-rules japanese")
    reply(session, "komi 6.5")
    answer = reply(session, line)
    assert answer.startswith("? ") and "\n" not in answer
    assert reply(session, "kata-get-rules") == "= " + JAPANESE_RULES
    assert reply(session, "showboard").endswith("komi 6.5")


def test_kata_set_rules_keeps_komi_and_takes_json():
    session = make_session()
    reply(session, "komi 0.5")
    assert reply(session, 'kata-set-rules {"ko":"SITUATIONAL", "scoring":"AREA", "whiteHandicapBonus":"N-1"}') == "="
    assert rules_of(session)["whiteHandicapBonus"] == "N-1" and rules_of(session)["ko"] == "SITUATIONAL"
    assert reply(session, "showboard").endswith("komi 0.5")
    assert reply(session, "kata-set-rule scoring TERRITORY") == "="
    assert rules_of(session)["scoring"] == "TERRITORY" and rules_of(session)["ko"] == "SITUATIONAL"
    assert rules_of(session)["tax"] == "NONE"  # kata-set-rule keeps the other fields, as KataGo's does
    assert reply(session, "kata-set-rule friendlyPassOk true") == "="
    assert rules_of(session)["friendlyPassOk"] is True


@pytest.mark.parametrize("name, ko, scoring, bonus", [
    ("japanese", "SIMPLE", "TERRITORY", "0"), ("chinese", "POSITIONAL", "AREA", "N"),
    ("aga", "SITUATIONAL", "AREA", "N-1"), ("new_zealand", "SITUATIONAL", "AREA", "0"),
])
def test_kgs_rules(name, ko, scoring, bonus):
    session = make_session()
    assert reply(session, f"kgs-rules {name}") == "="
    rules = rules_of(session)
    assert (rules["ko"], rules["scoring"], rules["whiteHandicapBonus"]) == (ko, scoring, bonus)


FINISHED_7X7 = ["boardsize 7", "clear_board", "komi 0.5"] + [f"play b {c}{r}" for c in "ce" for r in range(1, 8)] + [
    "play w a4", "play b pass", "play w pass"]


def test_final_score_under_japanese_and_chinese_rules():
    scores = {}
    for rules in ("chinese", "japanese", "tromp-taylor"):
        session = make_session()
        assert reply(session, f"kata-set-rules {rules}") == "="
        for line in FINISHED_7X7:
            assert reply(session, line) == "=", line
        assert reply(session, "final_status_list dead") == "= A4"
        scores[rules] = reply(session, "final_score")
    # area: 14 stones and 35 points; territory: 35 points and the dead A4 as a prisoner
    assert scores == {"chinese": "= B+48.5", "japanese": "= B+35.5", "tromp-taylor": "= B+48.5"}


def test_handicap_bonus_in_final_score():
    """A 9x9 handicap game with nothing played: black owns the board. Chinese rules give white one point per
    handicap stone, AGA's one fewer, Japanese none."""
    scores = {}
    for rules in ("chinese", "aga", "japanese"):
        session = make_session()
        for line in ("boardsize 9", "komi 0.5", f"kata-set-rules {rules}", "fixed_handicap 3"):
            assert reply(session, line).startswith("="), line
        scores[rules] = reply(session, "final_score")
    assert scores == {"chinese": "= B+77.5", "aga": "= B+78.5", "japanese": "= B+77.5"}


def test_ko_rule_change_that_the_game_breaks_is_refused():
    session = make_session()
    lines = ["boardsize 5", "kata-set-rules japanese", "play b b4", "play b a3", "play b b2", "play w c4",
             "play w d3", "play w c2", "play w b3", "play b c3", "play w pass", "play b pass", "play w b3"]
    for line in lines:
        assert reply(session, line) == "=", line
    answer = reply(session, "kata-set-rules tromp-taylor")
    assert answer.startswith("? cannot change the rules of this game: move 11"), answer
    assert rules_of(session)["ko"] == "SIMPLE"
    assert reply(session, "undo") == "="
    assert reply(session, "kata-set-rules tromp-taylor") == "="  # without the retake the game keeps to superko
    assert reply(session, "play w b3") == "? illegal move"


def test_sgf_ruleset_is_written_and_read(tmp_path: Path):
    session = make_session()
    for line in ("boardsize 9", "komi 6.5", "kata-set-rules japanese", "play b e5", "play w c3"):
        assert reply(session, line) == "=", line
    saved = reply(session, "printsgf")
    assert "RU[Japanese]" in saved and "KM[6.5]" in saved
    path = tmp_path / "japanese.sgf"
    path.write_text(saved[2:])
    fresh = make_session()
    assert reply(fresh, f"loadsgf {path}") == "="
    assert rules_of(fresh)["scoring"] == "TERRITORY" and rules_of(fresh)["tax"] == "SEKI"
    assert rules_of(fresh)["ko"] == "POSITIONAL"  # the engine's ko rule stays
    chinese = tmp_path / "chinese.sgf"
    chinese.write_text("(;GM[1]FF[4]SZ[9]KM[7.5]RU[Chinese];B[ee])")
    assert reply(fresh, f"loadsgf {chinese}") == "="
    assert rules_of(fresh)["scoring"] == "AREA" and rules_of(fresh)["tax"] == "NONE"
    unknown = tmp_path / "unknown.sgf"
    unknown.write_text("(;GM[1]FF[4]SZ[9]KM[7.5]RU[Martian];B[ee])")
    reply(fresh, "kata-set-rules japanese")
    assert reply(fresh, f"loadsgf {unknown}") == "="
    assert rules_of(fresh)["scoring"] == "TERRITORY"  # a ruleset Tabula does not know leaves the rules as they were
    assert "RU[Chinese]" in reply(make_session(), "printsgf")  # the default: area scoring


def test_the_rules_flag_sets_the_ruleset_and_a_bad_one_is_a_one_line_error(capsys):
    from tabula.gtp.__main__ import build_config, parse_args

    rules = build_config(parse_args(["--rules", "japanese", "--komi", "6.5"])).rules
    assert (rules.scoring, rules.komi, rules.superko) == ("territory", 6.5, "simple")
    assert build_config(parse_args(["--rules", "japanese", "--superko", "positional"])).rules.superko == "positional"
    default = build_config(parse_args([])).rules
    assert (default.scoring, default.superko) == ("area", "positional")
    with pytest.raises(SystemExit):
        parse_args(["--rules", "bogus"])
    assert "unknown rules 'bogus'" in capsys.readouterr().err
