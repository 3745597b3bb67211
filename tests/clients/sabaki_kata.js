// KataGo's analysis extension as LizzieYzy, LizGoban and Sabaki read it, driven through @sabaki/gtp's Controller:
// kata-analyze with ownership streamed for a few intervals and stopped by the next command, then
// kata-genmove_analyze ending with its play line. Usage: node sabaki_kata.js SIZE PROGRAM [ARGS...]
// (the engine must play SIZE with a network that has score and ownership heads).
// Prints one "ok ..." line per check and exits 0, or prints "FAIL ..." and exits 1.
//
// KataGo's format (docs/GTP_Extensions.md): "info move V visits N utility U winrate W scoreMean S scoreStdev D
// scoreLead L prior P lcb C order K pv V ..." per candidate, win rates, priors and lcb as floats in [0, 1], scores in
// points, all from the side to move's view; then, with "ownership true", "ownership" and SIZE*SIZE floats in
// [-1, 1], rows from the top (A19 on 19x19) to the bottom, each from left to right.
'use strict'

const {Controller, ControllerStateTracker} = require('@sabaki/gtp')
const {check, parseVertex, attach, quit, run} = require('./sabaki_common')

const TIMEOUT_MS = 30000
const KOMI = 7.5
const FIELDS = ['move', 'visits', 'utility', 'winrate', 'scoreMean', 'scoreStdev', 'scoreLead', 'prior', 'lcb',
  'order', 'pv']
const stderr = []

// One kata-analyze line: [{move, visits, winrate, scoreLead, ...}] and the ownership values (or null).
function parseKataLine(line, size) {
  const words = line.trim().split(/\s+/)
  if (words[0] !== 'info') throw new Error(`not an info line: ${line}`)
  const candidates = []
  let ownership = null
  let current = null
  for (let i = 0; i < words.length; i++) {
    const word = words[i]
    if (word === 'info') {
      current = {}
      candidates.push(current)
    } else if (word === 'ownership') {
      ownership = words.slice(i + 1).map(Number)
      break
    } else if (word === 'pv') {
      const pv = []
      while (i + 1 < words.length && !['info', 'ownership'].includes(words[i + 1])) pv.push(words[++i])
      current.pv = pv
    } else {
      current[word] = words[++i]
    }
  }
  for (const c of candidates) {
    const keys = Object.keys(c)
    if (keys.join(' ') !== FIELDS.join(' ')) throw new Error(`fields ${keys.join(' ')}, not KataGo's: ${line}`)
    if (parseVertex(c.move, size) == null) throw new Error(`bad move ${c.move}: ${line}`)
    for (const key of ['winrate', 'prior', 'lcb']) {
      if (!(+c[key] >= 0 && +c[key] <= 1)) throw new Error(`${key} ${c[key]} not in [0, 1]: ${line}`)
    }
    for (const key of ['utility', 'scoreMean', 'scoreStdev', 'scoreLead']) {
      if (!Number.isFinite(+c[key])) throw new Error(`${key} ${c[key]} is not a number: ${line}`)
    }
    if (c.scoreMean !== c.scoreLead) throw new Error(`scoreMean ${c.scoreMean} is not scoreLead ${c.scoreLead}`)
  }
  if (ownership != null && (ownership.length !== size * size || !ownership.every(v => v >= -1 && v <= 1))) {
    throw new Error(`ownership has ${ownership.length} values (${size * size} wanted) or one outside [-1, 1]`)
  }
  return {candidates, ownership}
}

function delay(ms) {
  return new Promise(resolve => setTimeout(resolve, ms))
}

async function main() {
  const [sizeText, program, ...args] = process.argv.slice(2)
  const size = +sizeText
  const controller = new Controller(program, args, {cwd: process.cwd(), env: process.env})
  const tracker = new ControllerStateTracker(controller)
  controller.on('stderr', ({content}) => stderr.push(content))
  controller.start()
  await attach(controller, ['kata-analyze', 'kata-genmove_analyze'])
  const history = [['B', 'C3'], ['W', 'G7'], ['B', 'C7']].map(([c, v]) => ({name: 'play', args: [c, v]}))
  await tracker.sync({komi: KOMI, boardsize: [size, size], history})
  check(tracker.state.history.length === 3, `synced ${size}x${size} with three moves`)

  // kata-analyze W 10 ownership true: lines every 10 centiseconds until the next command.
  const lines = []
  const reply = tracker.queueCommand({name: 'kata-analyze', args: ['W', '10', 'ownership', 'true']}, ({line}) => {
    if (line.startsWith('info ')) lines.push(line)
  })
  for (let i = 0; i < 100 && lines.length < 3; i++) await delay(50)
  const stop = controller.sendCommand({name: 'name'})
  const analysis = await reply
  await stop
  check(!analysis.error, `kata-analyze W 10 ownership true: "=" reply, ended by the next command`)
  check(lines.length >= 3, `kata-analyze streamed ${lines.length} lines over several intervals`)
  const parsed = lines.map(line => parseKataLine(line, size))
  check(parsed.every(p => p.ownership != null), `every line ends with ownership: ${size * size} values in [-1, 1]`)
  check(parsed.every(p => p.candidates.length >= 1), 'every line has candidates with KataGo\'s fields in order, ' +
    'win rates and priors in [0, 1], finite scores, scoreMean = scoreLead')
  const visits = parsed.map(p => p.candidates.reduce((sum, c) => sum + +c.visits, 0))
  check(visits[visits.length - 1] > visits[0], `visits grow (${visits[0]} -> ${visits[visits.length - 1]})`)

  // kata-genmove_analyze B 5 ownership true: the same lines, then "play V".
  let played = null
  const genmove = await tracker.queueCommand({name: 'kata-genmove_analyze', args: ['B', '5', 'ownership', 'true']},
    ({line}) => { if (line.startsWith('play ')) played = line.slice(5).trim() })
  check(!genmove.error && played != null, `kata-genmove_analyze B 5 ends with play ${played}`)
  const genLines = genmove.content.split('\n').filter(line => line.startsWith('info '))
  check(genLines.length >= 1 && genLines.every(line => parseKataLine(line, size).ownership != null),
    'kata-genmove_analyze lines parse, with ownership')
  await quit(controller)
}

run(main, TIMEOUT_MS, stderr)
