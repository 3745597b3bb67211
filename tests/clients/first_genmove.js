// A new user's first genmove as Sabaki makes it: the engine added with its full path and the argument gtp, a new
// 19x19 game at komi 6.5, then "generate move". Prints the seconds from the engine's start to each reply.
'use strict'
const {Controller, ControllerStateTracker} = require('@sabaki/gtp')
const [program, ...args] = process.argv.slice(2)
const started = Date.now()
const at = () => ((Date.now() - started) / 1000).toFixed(2)
const controller = new Controller(program, args)
controller.on('stderr', ({content}) => console.log(`[${at()} s] stderr: ${content}`))
const tracker = new ControllerStateTracker(controller)
controller.start()
async function main() {
  for (const name of ['name', 'version', 'protocol_version', 'list_commands']) {
    const reply = await controller.sendCommand({name})
    console.log(`[${at()} s] ${name}: ${reply.error ? '? ' : ''}${reply.content.split('\n')[0]}`)
  }
  await tracker.sync({komi: 6.5, boardsize: [19, 19], history: []})
  console.log(`[${at()} s] synced: boardsize 19, komi 6.5, clear_board`)
  const move = await controller.sendCommand({name: 'genmove', args: ['B']})
  console.log(`[${at()} s] genmove B: ${move.error ? '? ' : ''}${move.content}`)
  await controller.sendCommand({name: 'quit'})
  await controller.stop()
}
main().catch(e => { console.log('FAIL', e); process.exit(1) })
