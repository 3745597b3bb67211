// Drives a searching GTP engine's analysis the way Sabaki does, through @sabaki/gtp's Controller and
// ControllerStateTracker, and checks every reply. Usage: node sabaki_analysis.js MAX_VISITS PROGRAM [ARGS...]
//   (e.g. node sabaki_analysis.js 200 python3 -m tabula.gtp --player search --weights tiny.onnx --visits 200 --threads 1)
// MAX_VISITS is the engine's --visits, the most visits genmove_analyze may report.
// Prints one "ok ..." line per check and exits 0, or prints "FAIL ..." and exits 1.
//
// Sabaki's side of the protocol (its analysis spec and its EngineSyncer / generateMove code):
// - analysis commands are sent like any other; their reply is "=" followed by one line per update, each line one or
//   more candidates "info move V visits N winrate W prior P lcb L order O pv V V ..." (winrate and prior as integers
//   0..10000, or floats 0..1), until the engine reads the next command, which ends the reply with its blank line;
// - updates are read line by line through the library's streaming mechanism: the subscriber of sendCommand /
//   queueCommand, or subscribe() on the controller's 'command-sent' event;
// - Sabaki stops analysis by sending another command straight to the controller (its sendAbort sends
//   protocol_version) while the tracker's queue still waits on the analysis reply;
// - genmove_analyze streams the same lines and then "play V" before the blank line; Sabaki (and the state tracker)
//   take V from that line as the engine's move.
'use strict'

const {Controller, ControllerStateTracker} = require('@sabaki/gtp')
const {ALPHA, check, parseVertex, attach, quit, run} = require('./sabaki_common')

const TIMEOUT_MS = 30000
const SIZE = 19
const KOMI = 7.5
const stderr = []  // the engine's stderr, shown when a check fails
const ANALYSIS_COMMANDS = ['analyze', 'lz-analyze', 'genmove_analyze', 'lz-genmove_analyze']

// One analysis line per Sabaki's spec: candidates introduced by "info", each a run of "key value" pairs where "pv"
// takes every following word up to the next "info". Returns [{move, visits, winrate, prior, lcb, order, pv}] with
// numbers as numbers and the raw words kept in `raw`; throws on anything malformed.
function parseAnalysisLine(line, size) {
  const words = line.trim().split(/\s+/)
  if (words[0] !== 'info') throw new Error(`analysis line does not start with "info": ${line}`)
  const candidates = []
  let current = null
  for (let i = 0; i < words.length; i++) {
    const word = words[i]
    if (word === 'info') {
      current = {raw: {}}
      candidates.push(current)
    } else if (word === 'pv') {
      const pv = []
      while (i + 1 < words.length && words[i + 1] !== 'info') pv.push(words[++i])
      current.raw.pv = pv
    } else {
      if (i + 1 >= words.length || words[i + 1] === 'info') throw new Error(`key ${word} has no value: ${line}`)
      if (word in current.raw) throw new Error(`key ${word} twice in one candidate: ${line}`)
      current.raw[word] = words[++i]
    }
  }
  return candidates.map(({raw}) => {
    for (const key of ['move', 'visits', 'winrate', 'prior', 'lcb', 'order', 'pv']) {
      if (!(key in raw)) throw new Error(`candidate without ${key}: ${line}`)
    }
    const move = parseVertex(raw.move, size)
    const pv = raw.pv.map(v => parseVertex(v, size))
    if (move == null || pv.includes(null)) throw new Error(`bad vertex in candidate ${raw.move}: ${line}`)
    const integer = (key, lo, hi) => {
      if (!/^\d+$/.test(raw[key]) || +raw[key] < lo || +raw[key] > hi) {
        throw new Error(`${key} ${raw[key]} is not an integer in [${lo}, ${hi}]: ${line}`)
      }
      return +raw[key]
    }
    // Sabaki reads a winrate without a "." as 0..10000 (percent × 100); Leela Zero's format, which we send.
    return {move, visits: integer('visits', 1, 1e9), winrate: integer('winrate', 0, 10000),
      prior: integer('prior', 0, 10000), lcb: integer('lcb', 0, 10000), order: integer('order', 0, 1000), pv, raw}
  })
}

// Checks one parsed update; returns its total visits.
function checkUpdate(candidates, occupied, line) {
  if (candidates.length === 0) throw new Error(`no candidates: ${line}`)
  const seen = new Set()
  candidates.forEach((c, i) => {
    if (seen.has(c.move)) throw new Error(`${c.move} twice in one update: ${line}`)
    seen.add(c.move)
    if (occupied.has(c.move)) throw new Error(`candidate ${c.move} is an occupied point: ${line}`)
    if (c.order !== i) throw new Error(`candidate ${c.move} has order ${c.order} at place ${i}: ${line}`)
    if (c.pv.length === 0 || c.pv[0] !== c.move) throw new Error(`pv of ${c.move} does not start with it: ${line}`)
    if (c.lcb > c.winrate) throw new Error(`lcb ${c.lcb} above winrate ${c.winrate} for ${c.move}: ${line}`)
  })
  return candidates.reduce((sum, c) => sum + c.visits, 0)
}

function checkUpdates(label, lines, occupied, {minUpdates, minCandidates = 2}) {
  check(lines.length >= minUpdates, `${label}: ${lines.length} info lines streamed (at least ${minUpdates})`)
  const parsed = lines.map(line => parseAnalysisLine(line, SIZE))
  const totals = parsed.map((candidates, i) => checkUpdate(candidates, occupied, lines[i]))
  check(true, `${label}: every line parses per Sabaki's spec (move/visits/winrate/prior/lcb/order/pv, ` +
    `orders 0.., pv from the move, lcb <= winrate, no occupied point)`)
  const most = Math.max(...parsed.map(c => c.length))
  check(most >= minCandidates, `${label}: ${minCandidates > 1 ? 'several candidates' : 'candidates'} on one line ` +
    `(up to ${most}, at least ${minCandidates})`)
  check(totals.every((t, i) => i === 0 || t >= totals[i - 1]), `${label}: visits never shrink (${totals.join(' ')})`)
  return {parsed, totals}
}

function delay(ms) {
  return new Promise(resolve => setTimeout(resolve, ms))
}

function within(ms, promise, what) {
  return Promise.race([promise, delay(ms).then(() => { throw new Error(`${what}: nothing within ${ms} ms`) })])
}

async function main() {
  const [maxVisitsText, program, ...args] = process.argv.slice(2)
  const maxVisits = +maxVisitsText
  const controller = new Controller(program, args, {cwd: process.cwd(), env: process.env})
  const tracker = new ControllerStateTracker(controller)
  controller.on('stderr', ({content}) => stderr.push(content))

  // Every line the engine writes, to see that a stopped analysis really stays quiet.
  let stdoutLines = 0
  controller.on('started', () => controller.process.stdout.on('data', data => {
    stdoutLines += (data.toString().match(/\n/g) || []).length
  }))
  const sentNames = []
  let sent = 0
  controller.on('command-sent', ({command}) => { sent++; sentNames.push(command.name) })

  // Sabaki's EngineSyncer: subscribe to every analysis command's lines through the 'command-sent' event.
  const seenBySyncer = []
  controller.on('command-sent', ({command, subscribe}) => {
    if (!ANALYSIS_COMMANDS.includes(command.name)) return
    const lines = []
    seenBySyncer.push({command, lines})
    subscribe(({line}) => {
      if (line.startsWith('info ') || line.startsWith('play ')) lines.push(line)
    })
  })
  controller.start()

  const engineName = await attach(controller, ANALYSIS_COMMANDS)

  // Sabaki's sync: komi before boardsize, then clear_board and every play, pipelined. Black to move.
  const moves = [['B', 'Q16'], ['W', 'D4'], ['B', 'Q3'], ['W', 'D16'], ['B', 'R5'], ['W', 'C14']]
  let history = moves.map(([color, vertex]) => ({name: 'play', args: [color, vertex]}))
  const attachSent = sent
  await tracker.sync({komi: KOMI, boardsize: [SIZE, SIZE], history})
  const syncNames = sentNames.slice(attachSent).join(' ')
  check(syncNames === `komi boardsize clear_board ${moves.map(() => 'play').join(' ')}`, `sync sent ${syncNames}`)
  check(tracker.state.komi === KOMI && tracker.state.boardsize[0] === SIZE,
    `synced komi ${KOMI} and boardsize ${SIZE}`)
  check(tracker.state.history.length === history.length, `replayed ${history.length} moves`)
  const occupied = new Set(moves.map(([, v]) => v))

  // analyze B 10: updates every 10 centiseconds, read through queueCommand's subscriber (and the syncer's).
  let analyzeLines = []
  let enough
  const gotUpdates = new Promise(resolve => { enough = resolve })
  let analyzeDone = false
  const analyzeReply = tracker.queueCommand({name: 'analyze', args: ['B', '10']}, ({line}) => {
    if (line.startsWith('info ')) analyzeLines.push(line)
    if (analyzeLines.length >= 3) enough()
  }).then(reply => { analyzeDone = true; return reply })
  await within(10000, gotUpdates, 'analyze B 10')
  check(controller.busy && !analyzeDone, 'analyze B 10 keeps streaming while no command follows')
  // Sabaki's sendAbort: the next command goes straight to the controller; it ends the analysis and gets its own reply.
  const nameReply = controller.sendCommand({name: 'name'})
  const analyze = await within(5000, analyzeReply, 'analyze B 10 after name')
  const stopped = await within(5000, nameReply, 'name after analyze')
  check(!analyze.error, 'analyze B 10: "=" reply, ended by the next command')
  check(!stopped.error && stopped.content === engineName, `name stopped the analysis and got its own reply: ` +
    `${stopped.content}`)
  analyzeLines = analyze.content.split('\n').filter(line => line.startsWith('info '))
  check(analyze.content.split('\n').every(line => line.startsWith('info ')),
    'the analyze reply holds only info lines')
  const {parsed, totals} = checkUpdates('analyze B 10', analyzeLines, occupied, {minUpdates: 2})
  check(totals[totals.length - 1] > totals[0], `analyze B 10: visits grow (${totals[0]} -> ` +
    `${totals[totals.length - 1]})`)
  const syncerAnalyze = seenBySyncer.find(x => x.command.name === 'analyze')
  check(syncerAnalyze && syncerAnalyze.lines.join('\n') === analyzeLines.join('\n'),
    "'command-sent' subscribe() saw the same lines as the reply")
  const quietFrom = stdoutLines
  await delay(300)
  check(stdoutLines === quietFrom && !controller.busy, 'no output 300 ms after the analysis was stopped')

  // The user plays Black somewhere the analysis did not look (so genmove searches afresh), and Sabaki syncs it.
  const looked = new Set(parsed.flatMap(candidates => candidates.map(c => c.move)))
  const points = [...ALPHA.slice(0, SIZE)].flatMap(x => Array.from({length: SIZE}, (_, i) => `${x}${SIZE - i}`))
  const black = ['K10', ...points].find(v => !looked.has(v) && !occupied.has(v))
  history = [...history, {name: 'play', args: ['B', black]}]
  const before = sent
  await tracker.sync({komi: KOMI, boardsize: [SIZE, SIZE], history})
  check(sent - before === 1 && tracker.state.history.length === history.length, `synced one more move: B ${black}`)
  occupied.add(black)

  // genmove_analyze W 2: Sabaki's generateMove takes the move from the "play" line through the subscriber.
  let played = null
  const genmove = await within(15000, tracker.queueCommand({name: 'genmove_analyze', args: ['W', '2']}, ({line}) => {
    if (line.startsWith('play ')) played = line.slice('play '.length).trim()
  }), 'genmove_analyze W 2')
  check(!genmove.error, 'genmove_analyze W 2: "=" reply')
  const genmoveLines = genmove.content.split('\n')
  check(played != null && genmoveLines[genmoveLines.length - 1] === `play ${played}`,
    `genmove_analyze W 2 ends with play ${played}`)
  const move = parseVertex(played, SIZE)
  check(move != null && move !== 'PASS' && !occupied.has(move), `the played move ${played} is an empty point`)
  const genmoveInfo = genmoveLines.slice(0, -1)
  check(genmoveInfo.every(line => line.startsWith('info ')), 'genmove_analyze: only info lines before play')
  // One candidate is enough here: a move's search of 200 visits on a random network's flat prior may spend every visit
  // on its first move (an unvisited move's first-play value stays below it) and stop early; analyze above, thousands
  // of visits, checks lines of several candidates.
  const genmoveUpdates = checkUpdates('genmove_analyze W 2', genmoveInfo, occupied, {minUpdates: 1, minCandidates: 1})
  const summary = stderr.filter(line => / after \d+ playouts /.test(line)).pop() || ''
  check(Math.max(...genmoveUpdates.totals) <= maxVisits, `genmove_analyze W 2: at most ${maxVisits} visits ` +
    `(${genmoveUpdates.totals[genmoveUpdates.totals.length - 1]} in the last line; ${summary.trim()})`)
  const last = tracker.state.history[tracker.state.history.length - 1]
  check(tracker.state.history.length === history.length + 1 && last.args[0] === 'W' && last.args[1] === move,
    `the state tracker recorded W ${move} from the play line`)
  const syncerGenmove = seenBySyncer.find(x => x.command.name === 'genmove_analyze')
  check(syncerGenmove && syncerGenmove.lines.join('\n') === genmove.content,
    "'command-sent' subscribe() saw the same genmove_analyze lines")
  history = [...history, {name: 'play', args: ['W', move]}]
  occupied.add(move)

  // Sabaki adds the engine's move to its tree and syncs: nothing to send.
  const beforeSync = sent
  await tracker.sync({komi: KOMI, boardsize: [SIZE, SIZE], history})
  check(sent === beforeSync, 'syncing the game with the engine move sends no command')

  // lz-analyze 10 (Black to move), stopped by Sabaki's sendAbort command, protocol_version.
  let lzLines = 0
  let lzEnough
  const lzUpdates = new Promise(resolve => { lzEnough = resolve })
  const lzReply = tracker.queueCommand({name: 'lz-analyze', args: ['10']}, ({line}) => {
    if (line.startsWith('info ') && ++lzLines >= 2) lzEnough()
  })
  await within(10000, lzUpdates, 'lz-analyze 10')
  const abort = controller.sendCommand({name: 'protocol_version'})
  const lz = await within(5000, lzReply, 'lz-analyze 10 after protocol_version')
  const aborted = await within(5000, abort, 'protocol_version after lz-analyze')
  check(!lz.error, 'lz-analyze 10: "=" reply, ended by the next command')
  check(!aborted.error && aborted.content === '2', 'protocol_version stopped lz-analyze and got its own reply: 2')
  const lzInfo = lz.content.split('\n')
  check(lzInfo.every(line => line.startsWith('info ')), 'the lz-analyze reply holds only info lines')
  const lzChecked = checkUpdates('lz-analyze 10', lzInfo, occupied, {minUpdates: 2})
  check(lzChecked.totals[lzChecked.totals.length - 1] > lzChecked.totals[0], `lz-analyze 10: visits grow ` +
    `(${lzChecked.totals[0]} -> ${lzChecked.totals[lzChecked.totals.length - 1]})`)
  const lzQuiet = stdoutLines
  await delay(300)
  check(stdoutLines === lzQuiet, 'no output 300 ms after lz-analyze was stopped')

  const alive = await controller.sendCommand({name: 'name'})
  check(!alive.error && alive.content === engineName, 'still serving after the analyses')

  await quit(controller)
}

run(main, TIMEOUT_MS, stderr)
