// Drives a GTP engine the way Sabaki does, through @sabaki/gtp's Controller and ControllerStateTracker, and checks
// every reply. Usage: node sabaki.js PROGRAM [ARGS...]   (e.g. node sabaki.js python3 -m tabula.gtp --player random)
// Prints one "ok ..." line per check and exits 0, or prints "FAIL ..." and exits 1.
'use strict'

const {Controller, ControllerStateTracker} = require('@sabaki/gtp')
const {check, parseVertex, attach, quit, run} = require('./sabaki_common')

const TIMEOUT_MS = 60000
const REQUIRED = ['protocol_version', 'name', 'version', 'known_command', 'list_commands', 'quit', 'boardsize',
  'clear_board', 'komi', 'play', 'genmove', 'undo']

async function main() {
  const [program, ...args] = process.argv.slice(2)
  const controller = new Controller(program, args, {cwd: process.cwd(), env: process.env})
  controller.on('stderr', ({content}) => stderr.push(content))
  const tracker = new ControllerStateTracker(controller)
  controller.start()

  await attach(controller, REQUIRED)

  // Sabaki's sync: komi before boardsize, then clear_board and every play, pipelined.
  const history = [['B', 'D4'], ['W', 'F6'], ['B', 'C6'], ['W', 'E3'], ['B', 'pass'], ['W', 'G7']]
    .map(([color, vertex]) => ({name: 'play', args: [color, vertex]}))
  await tracker.sync({komi: 6.5, boardsize: [9, 9], history})
  check(tracker.state.boardsize[0] === 9 && tracker.state.komi === 6.5, 'synced komi 6.5 and boardsize 9')
  check(tracker.state.history.length === history.length, `replayed ${history.length} moves`)

  const move = await controller.sendCommand({name: 'genmove', args: ['B']})
  check(!move.error && isVertex(move.content, 9), `genmove B: ${move.content}`)
  const occupied = ['D4', 'F6', 'C6', 'E3', 'G7']
  check(!occupied.includes(move.content.trim().toUpperCase()), 'genmove chose an empty point')

  // A new position sharing the start of the old one: Sabaki undoes back to the fork and plays on.
  const fork = [...history.slice(0, 3), {name: 'play', args: ['W', 'C3']}]
  await tracker.sync({komi: 6.5, boardsize: [9, 9], history: fork})
  check(tracker.state.history.length === fork.length, 'synced a forked history (undo, then play)')
  const reply = await controller.sendCommand({name: 'genmove', args: ['B']})
  check(!reply.error && isVertex(reply.content, 9) && !['D4', 'F6', 'C6', 'C3'].includes(reply.content.trim()
    .toUpperCase()), `genmove B after the fork: ${reply.content}`)

  // Errors are "?" replies and the engine keeps serving.
  const illegal = await controller.sendCommand({name: 'play', args: ['W', 'D4']})
  check(illegal.error && /illegal move/.test(illegal.content), `play on an occupied point: ? ${illegal.content}`)
  const unknown = await controller.sendCommand({name: 'frobnicate'})
  check(unknown.error && /unknown command/.test(unknown.content), `unknown command: ? ${unknown.content}`)
  const size = await controller.sendCommand({name: 'boardsize', args: ['99']})
  check(size.error && /unacceptable size/.test(size.content), `boardsize 99: ? ${size.content}`)
  const alive = await controller.sendCommand({name: 'name'})
  check(!alive.error, 'still serving after errors')

  // A fresh board through the tracker after the failed boardsize, then a short game of genmoves.
  await tracker.sync({komi: 7.5, boardsize: [9, 9], history: []})
  for (const color of ['B', 'W', 'B', 'W']) {
    const genmove = await controller.sendCommand({name: 'genmove', args: [color]})
    check(!genmove.error && isVertex(genmove.content, 9), `genmove ${color}: ${genmove.content}`)
  }

  await quit(controller)
}

const isVertex = (text, size) => parseVertex(text, size, {resign: true}) !== null
const stderr = []

run(main, TIMEOUT_MS, stderr)
