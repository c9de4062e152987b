// Written by `mnemo init`: Mnemo's memory for this project. `mnemo init --remove` deletes this file.
//
// A pi extension (loaded from .pi/extensions/). Pi is not an MCP client: Mnemo reaches it through
// this file alone. The wake-up packet is added to the system prompt of each turn (never stored in the
// session, so harvest never reads it back), and a session is harvested when pi exits or switches to
// another. Mnemo being down or slow never holds pi up: the `mnemo hook` commands give up within about
// two seconds and print nothing.
import { spawn } from "node:child_process"

const MNEMO: string[] = __MNEMO_ARGV__
const URL_ARGS: string[] = __URL_ARGS__

function mnemo(event: string, payload: Record<string, unknown>): Promise<string> {
  return new Promise((resolve) => {
    let out = ""
    let child
    try {
      child = spawn(MNEMO[0], [...MNEMO.slice(1), "hook", event, "--agent", "pi", ...URL_ARGS], {
        stdio: ["pipe", "pipe", "ignore"],
      })
    } catch {
      resolve("")
      return
    }
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk
    })
    child.on("error", () => resolve(""))
    child.on("close", () => resolve(out))
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

export default function (pi: any) {
  let packet = ""

  const wakeUp = async (ctx: any) => {
    packet = (await mnemo("session-start", { cwd: ctx.cwd ?? process.cwd() })).trim()
  }
  const harvest = async (file: string | undefined, ctx: any) => {
    if (file) await mnemo("session-end", { transcript_path: file, cwd: ctx.cwd ?? process.cwd() })
  }

  pi.on("session_start", async (_event: any, ctx: any) => {
    await wakeUp(ctx)
  })
  pi.on("before_agent_start", async (event: any) => {
    if (packet) return { systemPrompt: `${event.systemPrompt}\n\n${packet}` }
  })
  pi.on("session_switch", async (event: any, ctx: any) => {
    await harvest(event.previousSessionFile, ctx)
    await wakeUp(ctx)
  })
  pi.on("session_shutdown", async (_event: any, ctx: any) => {
    await harvest(ctx.sessionManager?.getSessionFile?.(), ctx)
  })
}
