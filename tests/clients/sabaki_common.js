// What the Sabaki client tests share: checks, vertices, Sabaki's attach sequence, quitting, and the runner that
// prints "ok ..." per check and exits 0, or "FAIL ..." (with the engine's last stderr lines) and exits 1.
'use strict'

const ALPHA = 'ABCDEFGHJKLMNOPQRSTUVWXYZ'

function check(condition, message) {
  if (!condition) throw new Error(message)
  console.log(`ok ${message}`)
}

// The vertex in upper case, 'PASS' or 'RESIGN' (when allowed), or null when the text is none of these on `size`.
function parseVertex(text, size, {resign = false} = {}) {
  const word = text.trim().toUpperCase()
  if (word === 'PASS' || (resign && word === 'RESIGN')) return word
  const match = word.match(/^([A-HJ-Z])(\d+)$/)
  if (!match) return null
  const x = ALPHA.indexOf(match[1])
  const y = +match[2]
  return x >= 0 && x < size && y >= 1 && y <= size ? word : null
}

// Sabaki's attach: name, version, protocol_version and list_commands sent at once, without waiting for replies.
// Checks the replies and that every command in `required` is listed; returns the engine's name.
async function attach(controller, required) {
  const [name, version, protocol, commands] = await Promise.all(
    ['name', 'version', 'protocol_version', 'list_commands'].map(n => controller.sendCommand({name: n})))
  check(!name.error && name.content.trim() !== '', `name: ${name.content}`)
  check(!version.error, `version: ${version.content}`)
  check(!protocol.error && protocol.content.trim() === '2', 'protocol_version is 2')
  const known = commands.content.split('\n').map(x => x.trim())
  for (const command of required) check(known.includes(command), `list_commands has ${command}`)
  return name.content
}

async function quit(controller) {
  const exited = new Promise(resolve => controller.process.once('exit', (code, signal) => resolve({code, signal})))
  await controller.stop()
  const {code, signal} = await exited
  check(controller.process == null && code === 0, `quit: the engine exited with status ${code} (signal ${signal})`)
}

// Runs `main` under a deadline; `stderr` is the array the test fills with the engine's stderr lines.
function run(main, timeoutMs, stderr) {
  const fail = message => {
    console.log(`FAIL ${message}`)
    console.log(stderr.slice(-20).map(line => `  stderr: ${line}`).join('\n'))
    process.exit(1)
  }
  const timer = setTimeout(() => fail(`no answer within ${timeoutMs} ms`), timeoutMs)
  main().then(() => {
    clearTimeout(timer)
    process.exit(0)
  }, error => fail(error.message))
}

module.exports = {ALPHA, check, parseVertex, attach, quit, run}
