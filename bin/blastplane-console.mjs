// `blastplane console`: a REPL against the running stack's operator console (POST /api/chat).
// It signs in with the local identity provider's token for a chosen role, or takes a token;
// tab completion offers only the tools the caller's role may use (from the tools.search RPC).
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

const HISTORY_LIMIT = 500;

/** Runs the console; `stack` is the running stack's stack.json, `fail` prints and exits. */
export async function consoleCommand(argv, { stack, dataDir, fail, roles }) {
  const { values } = parseArgs({
    args: argv,
    options: {
      role: { type: "string" },
      token: { type: "string" },
      eval: { type: "string", multiple: true },
      json: { type: "boolean" },
    },
    strict: true,
  });
  if (values.role !== undefined && values.token !== undefined) fail("Give --role or --token, not both.");
  let bearer = values.token ?? process.env.BLASTPLANE_TOKEN;
  if (!bearer) {
    const role = values.role ?? "Reader";
    if (!roles.includes(role)) fail(`--role must be one of ${roles.join(", ")}`);
    const res = await fetch(`${stack.idp_url}/dev/token`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ role }),
    });
    const json = await res.json().catch(() => ({}));
    if (res.status !== 200) fail(`The identity provider refused: ${JSON.stringify(json.detail ?? json)}`, 1);
    bearer = json.access_token;
  }
  const api = `${stack.functions_url}/api`;
  const headers = { Authorization: `Bearer ${bearer}`, "Content-Type": "application/json" };

  async function post(route, body) {
    const res = await fetch(`${api}/${route}`, { method: "POST", headers, body: JSON.stringify(body) });
    const json = await res.json().catch(() => ({}));
    return { status: res.status, json };
  }

  const discovery = await post("rpc", { jsonrpc: "2.0", id: 1, method: "tools.search", params: {} });
  if (discovery.status !== 200)
    fail(
      `The console refused the token (${discovery.status}): ${JSON.stringify(discovery.json.detail ?? discovery.json)}`,
      1,
    );
  const { role, tools } = discovery.json.result;
  const names = tools.map((t) => t.name).sort();

  /** Sends one turn; prints the reply; false when the service refused the request itself. */
  async function turn(text) {
    const { status, json } = await post("chat", { text });
    if (status !== 200) {
      process.stderr.write(`error ${status}: ${JSON.stringify(json.detail ?? json)}\n`);
      return false;
    }
    process.stdout.write(values.json ? `${JSON.stringify(json)}\n` : `${json.text}\n`);
    return true;
  }

  if (values.eval) {
    let ok = true;
    for (const text of values.eval) ok = (await turn(text)) && ok;
    process.exitCode = ok ? 0 : 1;
    return;
  }

  const historyFile = path.join(dataDir, "console_history");
  const history = existsSync(historyFile)
    ? readFileSync(historyFile, "utf8").split("\n").filter(Boolean).slice(-HISTORY_LIMIT).reverse()
    : [];
  const rl = createInterface({
    input: process.stdin,
    output: process.stdout,
    prompt: `blastplane (${role})> `,
    history,
    historySize: HISTORY_LIMIT,
    completer: (line) => {
      const word = line.trimStart();
      if (word.includes(" ")) return [[], line];
      const hits = names.filter((n) => n.startsWith(word));
      return [hits.length ? hits : names, word];
    },
  });
  process.stdout.write(
    `Signed in as ${role}. Tools: ${names.join(", ")}\nType a tool name with its arguments (Tab completes), "help TOOL" for its arguments, "exit" to leave.\n`,
  );
  rl.prompt();
  for await (const line of rl) {
    const text = line.trim();
    if (text === "exit" || text === "quit") break;
    if (text) {
      appendFileSync(historyFile, `${text.replace(/\n/g, " ")}\n`);
      const help = /^help\s+([a-z_]+)$/.exec(text);
      if (help) {
        const tool = tools.find((t) => t.name === help[1]);
        process.stdout.write(
          tool
            ? `${tool.description}\n  ${tool.argument_hint}\n  floor ${tool.rbac_floor}, ${tool.side_effect_class}\n`
            : `No tool ${help[1]} for ${role}.\n`,
        );
      } else await turn(text);
    }
    rl.prompt();
  }
  rl.close();
}
