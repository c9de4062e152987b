// Written by `mnemo init`: Mnemo's memory for this project. `mnemo init --remove` deletes this file.
//
// An OpenCode plugin (loaded from .opencode/plugins/): the wake-up packet joins the system prompt,
// and a session that goes idle is harvested at once. Mnemo being down or slow never holds OpenCode
// up: the `mnemo hook` commands give up within about two seconds and print nothing.
import { spawn } from "node:child_process"

const MNEMO = __MNEMO_ARGV__
const URL_ARGS = __URL_ARGS__

function mnemo(event, payload) {
  return new Promise((resolve) => {
    let out = ""
    let child
    try {
      child = spawn(MNEMO[0], [...MNEMO.slice(1), "hook", event, "--agent", "opencode", ...URL_ARGS], {
        stdio: ["pipe", "pipe", "ignore"],
      })
    } catch {
      resolve("")
      return
    }
    child.stdout.on("data", (chunk) => {
      out += chunk
    })
    child.on("error", () => resolve(""))
    child.on("close", () => resolve(out))
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

export const MnemoPlugin = async ({ directory }) => {
  const packets = new Map()
  return {
    event: async ({ event }) => {
      // Idle: the agent finished its turn; harvest the session now instead of after the idle window.
      if (event.type === "session.idle" && event.properties?.sessionID) {
        await mnemo("session-end", { session_id: event.properties.sessionID, cwd: directory })
      }
    },
    // Asked once per session; kept out of the stored conversation, so harvest never reads it back.
    "experimental.chat.system.transform": async (input, output) => {
      const id = input?.sessionID
      if (!id) return
      if (!packets.has(id)) {
        packets.set(id, (await mnemo("session-start", { session_id: id, cwd: directory })).trim())
      }
      const packet = packets.get(id)
      if (packet) output.system.push(packet)
    },
  }
}
