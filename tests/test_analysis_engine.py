"""tabula analysis: KataGo's JSON analysis protocol. Transcripts (tests/analysis/*.txt) replayed through the engine,
and the engine's behaviour under concurrency: completion order, priority, terminate, reports during a search,
back-pressure, and the batching evaluator beneath it."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tabula.engine.config import SearchConfig
from tabula.engine.net.batching import BatchingEvaluator, split_evaluation
from tabula.engine.net.evaluator import Evaluation, UnsupportedBoardSizeError
from tabula.engine.rules.coords import PASS
from tabula.engine.rules.game import GameState
from tabula.engine.rules.interface import batch_legal_masks
from tabula.gtp.analysis_engine import AnalysisConfig, AnalysisEngine, parse_location, serve

TRANSCRIPTS = sorted((Path(__file__).parent / "analysis").glob("*.txt"))
ROOT = Path(__file__).resolve().parent.parent
SEARCH = SearchConfig(visits=32, threads=1, batch_size=4, root_symmetries=False)


class StandInNetwork:
    """A deterministic network with every head: priors by distance from the centre, a value and score from the
    stones on the board (side to move's view), ownership by colour. ``delay_s`` per call makes searches slow
    enough to watch; ``gate`` (an Event) holds every call until set."""

    board_sizes = (9, 13, 19)

    def __init__(self, delay_s: float = 0.0, gate: threading.Event | None = None):
        self.delay_s = delay_s
        self.gate = gate
        self.calls = 0
        self.positions = 0
        self.entered = threading.Event()  # set at the first call: a search has started
        self._lock = threading.Lock()

    def evaluate(self, states) -> Evaluation:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait()
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            self.calls += 1
            self.positions += len(states)
        size = states[0].size
        masks = batch_legal_masks(states).astype(np.float32)
        ys, xs = np.divmod(np.arange(size * size), size)
        centre = (size - 1) / 2
        weights = np.append(1.0 / (1.0 + np.hypot(xs - centre, ys - centre)), 0.05).astype(np.float32)
        policy = masks * weights
        policy /= policy.sum(axis=1, keepdims=True)
        colours = np.array([[state.color_at(p) for p in range(size * size)] for state in states])
        to_move = np.array([state.to_move for state in states])[:, None]
        mine = (colours == to_move).astype(np.float32) - ((colours != 0) & (colours != to_move)).astype(np.float32)
        margin = mine.sum(axis=1)
        return Evaluation(policy=policy, value=np.tanh(margin / 5.0).astype(np.float32),
                          score=(2.0 * margin).astype(np.float32), ownership=mine)


def make_engine(network=None, search: SearchConfig = SEARCH, **options):
    lines: list[str] = []
    lock = threading.Lock()

    def write(line: str) -> None:
        with lock:
            lines.append(line)

    config = AnalysisConfig(**{"analysis_threads": 2, **options})
    engine = AnalysisEngine(network or StandInNetwork(), search, config, write, seed=7)
    return engine, lines


def run_lines(inputs: list[str], **options) -> list[dict]:
    engine, lines = make_engine(**options)
    serve(engine, inputs)
    return [json.loads(line) for line in lines]


def query(query_id: str, **fields) -> str:
    base = {"id": query_id, "moves": [], "rules": "chinese", "komi": 7.5, "boardXSize": 9, "boardYSize": 9,
            "maxVisits": 8}
    return json.dumps({**base, **fields})


# -- transcripts ----------------------------------------------------------------------------------------------------

def matches(pattern, actual) -> bool:
    """Whether ``actual`` fits ``pattern`` (the transcript's pattern language: see tests/analysis/protocol.txt)."""
    if isinstance(pattern, str) and pattern.startswith("~"):
        kind, _, argument = pattern[1:].partition(" ")
        if kind == "any":
            return True
        if kind == "int":
            return isinstance(actual, int) and not isinstance(actual, bool)
        if kind == "number":
            return isinstance(actual, (int, float)) and not isinstance(actual, bool)
        if kind == "str":
            return isinstance(actual, str)
        if kind == "list":
            return isinstance(actual, list)
        if kind == "len":
            return isinstance(actual, list) and len(actual) == int(argument)
        if kind == "prefix":
            return isinstance(actual, str) and actual.startswith(argument)
        if kind in ("allowed", "avoided"):
            moves = {info["move"] for info in actual}
            named = set(argument.split())
            return bool(moves) and (moves <= named if kind == "allowed" else not moves & named)
        raise ValueError(f"unknown pattern {pattern}")
    if isinstance(pattern, dict):
        if not isinstance(actual, dict):
            return False
        for key, value in pattern.items():
            if key.startswith("!"):
                if key[1:] in actual:
                    return False
            elif key not in actual or not matches(value, actual[key]):
                return False
        return True
    if isinstance(pattern, list):
        # a list pattern: its items match the first items of the answer's list
        return isinstance(actual, list) and len(actual) >= len(pattern) and all(
            matches(p, a) for p, a in zip(pattern, actual))
    return pattern == actual


def parse_transcript(text: str) -> tuple[list[str], list[dict]]:
    inputs, expected = [], []
    for raw in text.splitlines():
        if raw.startswith("> "):
            inputs.append(raw[2:])
        elif raw.startswith("< "):
            expected.append(json.loads(raw[2:]))
    return inputs, expected


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(path):
    inputs, expected = parse_transcript(path.read_text())
    answers = run_lines(inputs)
    unmatched = list(answers)
    for pattern in expected:
        found = next((a for a in unmatched if matches(pattern, a)), None)
        assert found is not None, f"no answer matches {json.dumps(pattern)}\nanswers:\n" + "\n".join(
            json.dumps(a)[:300] for a in unmatched)
        unmatched.remove(found)
    assert not unmatched, "answers no pattern expects:\n" + "\n".join(json.dumps(a)[:300] for a in unmatched)


def test_pattern_language_can_fail():
    assert not matches({"a": "~int"}, {"a": 1.5})
    assert not matches({"!a": "~any"}, {"a": 1})
    assert not matches({"a": "~len 2"}, {"a": [1]})
    assert not matches({"m": "~allowed C3"}, {"m": [{"move": "D4"}]})
    assert matches({"a": [{"b": 1}]}, {"a": [{"b": 1, "c": 2}, {"b": 3}]})


# -- what the numbers mean ------------------------------------------------------------------------------------------

def test_locations_parse_as_katago_writes_them():
    assert parse_location("A1", 9) == 0
    assert parse_location("(0,0)", 9) == 72  # x, y from the top left corner
    assert parse_location("(8,8)", 9) == 8
    assert parse_location("pass", 9) == PASS


def test_visits_and_perspective():
    """maxVisits is the root's visits; BLACK, WHITE and SIDETOMOVE report the same search from each side."""
    moves = [["B", "E5"], ["W", "C3"], ["B", "D4"]]  # white to move, black a stone ahead
    answers = {}
    for side in ("BLACK", "WHITE", "SIDETOMOVE"):
        [answer] = run_lines([query("p", moves=moves, maxVisits=24, includeOwnership=True,
                                    overrideSettings={"reportAnalysisWinratesAs": side})], analysis_threads=1)
        answers[side] = answer
    black, white, mover = answers["BLACK"], answers["WHITE"], answers["SIDETOMOVE"]
    assert black["rootInfo"]["visits"] == 24
    assert sum(info["visits"] for info in black["moveInfos"]) == 23  # the root's own evaluation is a visit
    assert black["rootInfo"]["winrate"] > 0.5 and black["rootInfo"]["scoreLead"] > 0  # black is ahead
    assert white["rootInfo"]["winrate"] == pytest.approx(1 - black["rootInfo"]["winrate"], abs=1e-6)
    assert white["rootInfo"]["scoreLead"] == pytest.approx(-black["rootInfo"]["scoreLead"], abs=1e-5)
    assert mover["rootInfo"] == white["rootInfo"]  # white is to move
    best_black, best_white = black["moveInfos"][0], white["moveInfos"][0]
    assert best_black["move"] == best_white["move"]
    assert best_white["winrate"] == pytest.approx(1 - best_black["winrate"], abs=1e-6)
    assert best_white["utility"] == pytest.approx(-best_black["utility"], abs=1e-6)
    # ownership: rows from the top (A9 first), +1 black's from black's view
    size = 9
    e5, c3, d4 = (size - 5) * size + 4, (size - 3) * size + 2, (size - 4) * size + 3
    assert black["ownership"][e5] > 0.5 and black["ownership"][d4] > 0.5 and black["ownership"][c3] < -0.5
    assert white["ownership"][e5] < -0.5


def test_policy_and_temperature():
    """includePolicy: -1 on occupied points, the priors elsewhere summing to 1; a root temperature above 1 flattens
    the priors the search uses."""
    [plain] = run_lines([query("t", moves=[["B", "A9"]], includePolicy=True)], analysis_threads=1)
    [hot] = run_lines([query("t", moves=[["B", "A9"]], includePolicy=True, rootPolicyTemperature=5.0)],
                      analysis_threads=1)
    policy = np.array(plain["policy"])
    assert policy[0] == -1 and (policy[1:] >= 0).all()  # A9 is the top left point, occupied
    assert policy[policy >= 0].sum() == pytest.approx(1.0, abs=1e-5)
    assert np.array(hot["policy"])[1:].max() < policy[1:].max()


def test_pv_visits_follow_the_pv():
    [answer] = run_lines([query("pv", maxVisits=40, includePVVisits=True)], analysis_threads=1)
    best = answer["moveInfos"][0]
    assert len(best["pvVisits"]) == len(best["pv"])
    assert best["pvVisits"][0] == best["visits"]
    assert best["pvVisits"] == sorted(best["pvVisits"], reverse=True)


# -- concurrency ----------------------------------------------------------------------------------------------------

def test_twenty_concurrent_queries_answered_in_completion_order():
    """20 queries searched at once: every one answered exactly once, small ones before the big ones sent before
    them, and their leaves batched together for the network."""
    network = StandInNetwork(delay_s=0.002)
    engine, lines = make_engine(network, analysis_threads=20)
    big = [query(f"big{i}", maxVisits=160, moves=[["B", "E5"]]) for i in range(5)]
    small = [query(f"small{i}", maxVisits=4, moves=[["B", "C3"], ["W", "G7"]]) for i in range(15)]
    serve(engine, big + small)
    answers = [json.loads(line) for line in lines]
    ids = [a["id"] for a in answers]
    assert sorted(ids) == sorted([f"big{i}" for i in range(5)] + [f"small{i}" for i in range(15)])
    assert all(a["isDuringSearch"] is False for a in answers)
    last_small = max(ids.index(f"small{i}") for i in range(15))
    first_big = min(ids.index(f"big{i}") for i in range(5))
    assert last_small < first_big  # sent after, answered before
    assert engine.batcher.mean_batch > 1.5  # several searches' leaves in one network call
    assert network.positions > network.calls


def test_priority_first_among_queued_turns():
    """With one worker busy, a higher priority queued later is searched before a lower one queued first."""
    gate = threading.Event()
    network = StandInNetwork(gate=gate)
    engine, lines = make_engine(network, analysis_threads=1)
    engine.handle_line(query("busy", maxVisits=4))
    assert network.entered.wait(10)  # the worker has taken "busy" and waits at the network
    engine.handle_line(query("low", maxVisits=4, priority=-1))
    engine.handle_line(query("high", maxVisits=4, priority=10))
    engine.handle_line(query("turns", maxVisits=4, moves=[["B", "C3"], ["W", "D4"]], analyzeTurns=[0, 1, 2],
                             priorities=[1, 20, 0]))
    gate.set()
    engine.finish()
    order = [(a["id"], a.get("turnNumber")) for a in map(json.loads, lines)]
    assert order == [("busy", 0), ("turns", 1), ("high", 0), ("turns", 0), ("turns", 2), ("low", 0)]


def test_terminate_queued_and_running():
    gate = threading.Event()
    network = StandInNetwork(delay_s=0.001, gate=gate)
    engine, lines = make_engine(network, analysis_threads=1)
    engine.handle_line(query("run", maxVisits=100_000))
    assert network.entered.wait(10)  # "run" is searching: "wait" queues behind it
    engine.handle_line(query("wait", moves=[["B", "C3"]], analyzeTurns=[0, 1]))
    engine.handle_line(json.dumps({"id": "stop1", "action": "terminate", "terminateId": "wait", "turnNumbers": [1]}))
    gate.set()
    deadline = time.monotonic() + 10
    while network.calls < 3 and time.monotonic() < deadline:  # "run" has visits to report when it is stopped
        time.sleep(0.01)
    engine.handle_line(json.dumps({"id": "stop2", "action": "terminate_all"}))
    engine.finish()
    answers = [json.loads(line) for line in lines]
    by_key = {(a["id"], a.get("turnNumber")): a for a in answers}
    assert by_key[("wait", 1)] == {"id": "wait", "isDuringSearch": False, "noResults": True, "turnNumber": 1}
    assert by_key[("stop1", None)]["action"] == "terminate"
    assert by_key[("stop2", None)]["action"] == "terminate_all"
    stopped = by_key[("run", 0)]
    assert stopped["isDuringSearch"] is False and 1 <= stopped["rootInfo"]["visits"] < 100_000
    # the query terminated by terminate_all before it started, or stopped early: answered once, finally
    assert [a.get("isDuringSearch") for a in answers if a["id"] == "wait" and a.get("turnNumber") == 0] == [False]


def test_reports_during_search_then_one_final():
    [*during, final] = run_lines([query("r", maxVisits=300, reportDuringSearchEvery=0.02)],
                                 network=StandInNetwork(delay_s=0.003), analysis_threads=1)
    assert during and all(a["isDuringSearch"] is True for a in during)
    assert final["isDuringSearch"] is False and final["rootInfo"]["visits"] == 300
    visits = [a["rootInfo"]["visits"] for a in during]
    # a report may land just as the last visit completes (its beat falls between the workers' end and the final
    # answer), so the last one may show them all
    assert visits == sorted(visits) and visits[0] < 300 and visits[-1] <= 300


@pytest.mark.parametrize("fields", [{"firstReportDuringSearchAfter": 0.02},
                                    {"reportDuringSearchEvery": 60.0, "firstReportDuringSearchAfter": 0.02}])
def test_first_report_after_then_every(fields):
    # KataGo: the first report after firstReportDuringSearchAfter, the next ones every reportDuringSearchEvery
    # (never, where only the first is given); reportDuringSearchEvery alone sets both
    [*during, final] = run_lines([query("r", maxVisits=300, **fields)], network=StandInNetwork(delay_s=0.003),
                                 analysis_threads=1)
    assert len(during) == 1 and during[0]["isDuringSearch"] is True
    assert final["isDuringSearch"] is False and final["rootInfo"]["visits"] == 300


def test_back_pressure_bounds_the_queue():
    """While the queue is full, reading stops: the reader waits in handle_line until a turn starts."""
    gate = threading.Event()
    engine, lines = make_engine(StandInNetwork(gate=gate), analysis_threads=1, max_queued_turns=3)
    fed = []

    def feed():
        for i in range(8):
            engine.handle_line(query(f"q{i}", maxVisits=2))
            fed.append(i)

    reader = threading.Thread(target=feed)
    reader.start()
    deadline = time.monotonic() + 10
    while len(fed) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # room for a fifth, were the queue not bounded
    assert len(fed) == 4  # one taken by the worker, three queued, the fifth waits
    gate.set()
    reader.join(timeout=10)
    engine.finish()
    assert len(fed) == 8 and len(lines) == 8


def test_bad_network_call_is_an_error_line_and_the_engine_serves_on():
    class Flaky(StandInNetwork):
        def evaluate(self, states):
            if states[0].size == 13:
                raise UnsupportedBoardSizeError("no 13x13 today")
            return super().evaluate(states)

    answers = run_lines([query("bad", boardXSize=13, boardYSize=13), query("good")], network=Flaky())
    bad = next(a for a in answers if a["id"] == "bad")
    assert "error" in bad and "no 13x13 today" in bad["error"]
    assert next(a for a in answers if a["id"] == "good")["rootInfo"]["visits"] == 8


def test_fuzzed_lines_always_get_well_formed_answers():
    rng = np.random.default_rng(3)
    pieces = ['{"id":"f"', ',"moves":[]', ',"rules":"chinese"', ',"boardXSize":9', ',"boardYSize":9', "}", "[", "]",
              ',"maxVisits":2', ',"komi":"x"', ',"action":"clear_cache"', ",", '"', "null", ',"analyzeTurns":[9]']
    inputs = ["".join(rng.choice(pieces, size=rng.integers(1, 8))) for _ in range(60)]
    answers = run_lines(inputs)
    assert answers and all(isinstance(a, dict) for a in answers)
    assert all("error" in a or "id" in a for a in answers)


# -- the batching evaluator -----------------------------------------------------------------------------------------

def test_batching_evaluator_merges_and_splits():
    network = StandInNetwork(delay_s=0.01)
    batcher = BatchingEvaluator(network, max_batch=64)
    positions = []
    for i in range(12):
        state = GameState(9)
        state.play(i)
        positions.append([state, state.copy()])
    results: dict[int, Evaluation] = {}

    def call(i):
        results[i] = batcher.evaluate(positions[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert network.calls < 12  # merged
    for i in range(12):
        direct = StandInNetwork().evaluate(positions[i])
        np.testing.assert_allclose(results[i].policy, direct.policy)
        np.testing.assert_allclose(results[i].value, direct.value)
        np.testing.assert_allclose(results[i].ownership, direct.ownership)


def test_batching_evaluator_keeps_sizes_apart_and_passes_errors_on():
    class SizeNine(StandInNetwork):
        board_sizes = (9,)

        def evaluate(self, states):
            assert len({s.size for s in states}) == 1
            if states[0].size != 9:
                raise UnsupportedBoardSizeError("9x9 only")
            return super().evaluate(states)

    batcher = BatchingEvaluator(SizeNine())
    pending = [batcher.evaluate_async([GameState(9)]), batcher.evaluate_async([GameState(13)])]
    assert pending[0].result().policy.shape == (1, 82)
    with pytest.raises(UnsupportedBoardSizeError):
        pending[1].result()
    assert batcher.evaluate([GameState(9)]).value.shape == (1,)  # still serving
    batcher.close()


def test_split_evaluation_slices_every_field():
    evaluation = Evaluation(policy=np.arange(12.0).reshape(6, 2), value=np.arange(6.0), score=None,
                            ownership=np.zeros((6, 4)))
    first, second = split_evaluation(evaluation, [2, 4])
    assert first.value.tolist() == [0, 1] and second.policy.shape == (4, 2) and second.score is None


# -- the command ----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_command_line_serves_stdio(tiny_aux_onnx):
    """``tabula analysis`` as a client starts it: queries on stdin, only JSON lines on stdout."""
    lines = [query("cli", maxVisits=6, includeOwnership=True), "nonsense",
             json.dumps({"id": "v", "action": "query_version"})]
    process = subprocess.run([sys.executable, "-m", "tabula.tools.cli", "analysis", "--weights", str(tiny_aux_onnx),
                              "--seed", "1", "--analysis-threads", "2"], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert process.returncode == 0, process.stderr
    answers = [json.loads(line) for line in process.stdout.splitlines()]
    assert {a.get("id") for a in answers} == {"cli", "v", None}
    cli = next(a for a in answers if a.get("id") == "cli")
    assert cli["rootInfo"]["visits"] == 6 and len(cli["ownership"]) == 81


def test_quit_without_waiting_ends_everything_at_end_of_input():
    engine, lines = make_engine(StandInNetwork(delay_s=0.001), analysis_threads=1, quit_without_waiting=True)
    started = time.monotonic()
    serve(engine, [query("long", maxVisits=1_000_000), query("queued", maxVisits=1_000_000)])
    answers = [json.loads(line) for line in lines]
    assert time.monotonic() - started < 5
    assert sorted(a["id"] for a in answers) == ["long", "queued"]
    assert all(a["isDuringSearch"] is False for a in answers)
    assert all(a.get("noResults") or a["rootInfo"]["visits"] < 1_000_000 for a in answers)


def test_shared_tables_one_per_ruleset_and_few_kept():
    from tabula.engine.rules.game import Rules
    from tabula.gtp.analysis_engine import SharedTables

    tables = SharedTables(capacity=10)
    chinese, other_komi, japanese = (GameState(9, Rules(komi=k)) for k in (7.5, 6.5, 0.5))
    first = tables.for_state(chinese)
    assert tables.for_state(chinese.copy()) is first  # same rules: the same table, so no search clears it
    assert tables.for_state(other_komi) is not first  # the keys have no komi: another table
    tables.for_state(japanese)
    assert tables.for_state(chinese) is not first  # only the two most recent rulesets are kept


def test_the_shared_table_tells_apart_what_the_network_reads_beyond_the_stones():
    # The same stones, side to move and ko point after another history: black to move after white's pass (a pass
    # ends the game next, which katago-v7 reads), or without one. The second query's root is not the first's result.
    network = StandInNetwork()
    moves_after_pass = [["B", "D4"], ["W", "E5"], ["B", "F6"], ["W", "pass"]]
    moves_without = [["B", "D4"], ["W", "pass"], ["B", "F6"], ["W", "E5"]]
    engine, lines = make_engine(network, analysis_threads=1)
    serve(engine, [query(f"q{number}", moves=moves, maxVisits=1)
                   for number, moves in enumerate((moves_after_pass, moves_without))])
    assert sorted(json.loads(line)["id"] for line in lines) == ["q0", "q1"]
    assert network.positions == 2


def test_the_table_key_has_the_passes_and_the_superko_bans():
    from tabula.engine.play.search import table_key
    from tabula.engine.rules.coords import parse_vertex

    def played(moves):
        state = GameState(9)  # positional superko
        for vertex in moves:
            state.play(parse_vertex(vertex, 9))
        return state

    # white's E5 in atari: black captures at E4
    plain = played(["D5", "E5", "F5", "A1", "E6", "B1"])
    assert table_key(plain) == table_key(plain.copy())
    after_pass = played(["D5", "E5", "F5", "A1", "pass", "B1", "E6", "pass"])
    assert after_pass.hash == plain.hash and table_key(after_pass) != table_key(plain)
    # the same position in a game that has seen the one after the capture: E4 is banned there
    banned = plain.copy()
    captured = plain.copy()
    captured.play(parse_vertex("E4", 9))
    banned.seen = banned.seen | {captured._superko_key(captured.board.hash, captured.to_move)}
    assert banned.hash == plain.hash and table_key(banned) != table_key(plain)
    assert not banned.legal(parse_vertex("E4", 9)) and plain.legal(parse_vertex("E4", 9))


def test_bench_analysis_times_both_sides(tiny_onnx, tmp_path, capsys):
    from tabula.tools.bench import analysis as bench_analysis

    moves = "".join(f";{'B' if i % 2 == 0 else 'W'}[{'abcdefghijklmnopqrs'[i]}{'abcdefghijklmnopqrs'[(7 * i) % 19]}]"
                    for i in range(12))
    game = tmp_path / "game.sgf"
    game.write_text(f"(;GM[1]FF[4]SZ[19]KM[7.5]{moves})")
    results = tmp_path / "results.jsonl"
    assert bench_analysis.main([str(tiny_onnx), str(game), "--turns", "10", "--visits", "4",
                                "--analysis-threads", "2", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "analysis engine, one query" in out and "one position at a time" in out
    figures = json.loads(results.read_text())
    assert figures["analysis"]["visits"] == figures["gtp"]["visits"] == 40


def test_bench_analysis_reports_a_refused_query_rather_than_waiting():
    from tabula.tools.bench import analysis as bench_analysis

    query = {"id": "review", "moves": [["B", "D4"], ["W", "E5"]], "rules": "chinese", "komi": 7.5, "boardXSize": 7,
             "boardYSize": 7, "analyzeTurns": [0, 1], "maxVisits": 4}  # a size the network does not play
    raised = []

    def run() -> None:
        try:
            bench_analysis.time_analysis(StandInNetwork(), SEARCH, query, threads=1, seed=1)
        except SystemExit as error:
            raised.append(str(error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive() and "refused the game" in raised[0] and "7x7" in raised[0]


@pytest.mark.slow
def test_bench_analysis_drives_a_gtp_process(tiny_onnx, tmp_path, capsys):
    from tabula.tools.bench import analysis as bench_analysis

    game = tmp_path / "game.sgf"
    game.write_text("(;GM[1]FF[4]SZ[19]KM[7.5];B[pd];W[dp];B[pp];W[dd];B[qf];W[nc])")
    assert bench_analysis.main([str(tiny_onnx), str(game), "--turns", "6", "--visits", "4", "--only",
                                "gtp-process"]) == 0
    assert "a tabula gtp process, tabula-winrate then play at each position" in capsys.readouterr().out


def test_moves_ownership_is_the_position_after_each_move():
    [answer] = run_lines([query("mo", maxVisits=30, includeMovesOwnership=True, includeOwnership=True)],
                         analysis_threads=1)  # one line: no warning on the field
    size = 9
    for info in answer["moveInfos"]:
        if info["move"] == "pass" or "ownership" not in info:
            continue
        assert len(info["ownership"]) == size * size
        x, y = "ABCDEFGHJ".index(info["move"][0]), int(info["move"][1:]) - 1
        assert info["ownership"][(size - 1 - y) * size + x] > 0.5  # black's new stone, from black's view
    assert any("ownership" in info for info in answer["moveInfos"])


def test_tabula_analysis_refuses_options_that_nothing_would_read(capsys):
    """The rules and komi come with each query, and the per-move log lines from a GTP player: tabula analysis
    offers none of --komi, --rules, --superko and --verbose rather than ignoring them."""
    from tabula.gtp.analysis_main import build_analysis_config, parse_args

    for words in (["--komi", "6.5"], ["--rules", "japanese"], ["--superko", "simple"], ["-v"]):
        with pytest.raises(SystemExit):
            parse_args(words)
        assert "unrecognized arguments" in capsys.readouterr().err
    config, analysis = build_analysis_config(parse_args(["--visits", "50", "--analysis-threads", "3"]))
    assert config.search.visits == 50 and analysis.analysis_threads == 3
