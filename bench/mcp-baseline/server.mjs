// Baseline of `cargo bench --bench mcp`: a plugin's tool served over MCP the way a Node IDE
// host would do it with the official TypeScript SDK — a streamable HTTP MCP server
// (`@modelcontextprotocol/sdk` McpServer + StreamableHTTPServerTransport, stateful sessions,
// on plain node:http) whose tool runs in a plugin started with `child_process.fork` (IPC
// channel, json serialization), the message shapes of the plugin format: `call_tool`
// {requestId, toolName, params, context:{cwd}} -> `tool_result` {requestId, content} or
// `tool_error` {requestId, message}.
//
//   node server.mjs <plugin-dir>
//
// The plugin's tools are listed as `<last label of the plugin id>_<tool name>` (the names the
// Rust server gives), their input checked by zod (the SDK's way) against a schema of string
// properties built from the manifest. Requests need `Authorization: Bearer <token>` and a
// loopback `Host` on our port, as the Rust server does.
//
// stdout, first line: {"port":N,"token":"…","node":"v…","sdk":"1.x","tools":[…]}
// stdin: `quit` (or EOF) ends the plugin and exits.

import { fork } from 'node:child_process';
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { createInterface } from 'node:readline';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const dir = process.argv[2] && path.resolve(process.argv[2]);
if (!dir) {
  process.stderr.write('usage: node server.mjs <plugin-dir>\n');
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
const label = manifest.id.split('.').pop();
const MAX_BODY = 16 * 1024 * 1024;
const CALL_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------- the plugin
const child = fork(path.join(dir, manifest.main), [], {
  cwd: dir,
  silent: true,
  serialization: 'json',
  env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
});
child.stdout.resume();
child.stderr.resume();

/** requestId -> {resolve, reject, timer} */
const pending = new Map();
let seq = 0;
child.on('message', (msg) => {
  const p = msg && pending.get(msg.requestId);
  if (!p) return;
  if (msg.type !== 'tool_result' && msg.type !== 'tool_error') return;
  pending.delete(msg.requestId);
  clearTimeout(p.timer);
  if (msg.type === 'tool_result') p.resolve(msg);
  else p.reject(new Error(msg.message ?? 'tool error'));
});
child.on('error', (e) => process.stderr.write(`mcp-baseline: plugin: ${e.message}\n`));
child.on('exit', (code, signal) => {
  for (const p of pending.values()) {
    clearTimeout(p.timer);
    p.reject(new Error(`plugin exited (${code}, ${signal})`));
  }
  pending.clear();
});

function callPlugin(toolName, params) {
  const requestId = `r${++seq}`;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(requestId);
      reject(new Error(`plugin call timed out after ${CALL_TIMEOUT_MS} ms`));
    }, CALL_TIMEOUT_MS);
    pending.set(requestId, { resolve, reject, timer });
    const fail = (e) => {
      if (!pending.delete(requestId)) return;
      clearTimeout(timer);
      reject(e);
    };
    if (!child.connected) return fail(new Error('the plugin is not running'));
    const msg = { type: 'call_tool', requestId, toolName, params, context: { cwd: process.cwd() } };
    child.send(msg, (e) => e && fail(e));
  });
}

// ---------------------------------------------------------------- MCP
function shapeOf(parameters) {
  const required = new Set(parameters?.required ?? []);
  const shape = {};
  for (const [key, prop] of Object.entries(parameters?.properties ?? {})) {
    const t = prop.type === 'string' ? z.string() : z.any();
    shape[key] = required.has(key) ? t : t.optional();
  }
  return shape;
}

const toolNames = manifest.tools.map((t) => `${label}_${t.name}`);

function createMcpServer() {
  const server = new McpServer({ name: 'qwen-companion-mcp-baseline', version: '0.0.0' });
  for (const tool of manifest.tools) {
    server.registerTool(
      `${label}_${tool.name}`,
      { description: tool.description, inputSchema: shapeOf(tool.parameters) },
      async (args) => {
        try {
          const r = await callPlugin(tool.name, args);
          return { content: r.content ?? [] };
        } catch (e) {
          return { content: [{ type: 'text', text: String(e.message ?? e) }], isError: true };
        }
      },
    );
  }
  return server;
}

/** sessionId -> transport */
const sessions = new Map();
const token = randomBytes(32).toString('hex');
const expectedAuth = Buffer.from(`Bearer ${token}`);
let port = 0;

function sendJson(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function rpcError(res, status, message) {
  sendJson(res, status, { jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const host = req.headers.host ?? '';
  if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) {
    return sendJson(res, 403, { error: 'Invalid Host header' });
  }
  if (req.headers.origin !== undefined) return sendJson(res, 403, { error: 'Origin refused' });
  const auth = Buffer.from(req.headers.authorization ?? '');
  if (auth.length !== expectedAuth.length || !timingSafeEqual(auth, expectedAuth)) {
    res.writeHead(401).end('Unauthorized');
    return;
  }
  if (new URL(req.url, 'http://x').pathname !== '/mcp') {
    res.writeHead(404).end('Not Found');
    return;
  }
  const sid = req.headers['mcp-session-id'];
  let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
  if (req.method !== 'POST') {
    if (!transport) return rpcError(res, 400, 'Bad Request: no valid session ID');
    return transport.handleRequest(req, res);
  }
  let body;
  try {
    body = JSON.parse((await readBody(req)).toString('utf8'));
  } catch (e) {
    return rpcError(res, 400, `Parse error: ${e.message}`);
  }
  if (!transport) {
    if (sid !== undefined || !isInitializeRequest(body)) {
      return rpcError(res, 400, 'Bad Request: no valid session ID');
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await createMcpServer().connect(transport);
  }
  await transport.handleRequest(req, res, body);
}

const httpServer = createServer((req, res) => {
  handle(req, res).catch((e) => {
    if (!res.headersSent) rpcError(res, 500, String(e.message ?? e));
    else res.end();
  });
});

function sdkVersion() {
  try {
    const require = createRequire(import.meta.url);
    let d = path.dirname(require.resolve('@modelcontextprotocol/sdk/server/mcp.js'));
    for (let i = 0; i < 5; i++, d = path.dirname(d)) {
      try {
        const pkg = JSON.parse(readFileSync(path.join(d, 'package.json'), 'utf8'));
        if (pkg.name === '@modelcontextprotocol/sdk') return pkg.version;
      } catch {}
    }
  } catch {}
  return 'unknown';
}

httpServer.listen(0, '127.0.0.1', () => {
  port = httpServer.address().port;
  process.stdout.write(
    `${JSON.stringify({ port, token, node: process.version, sdk: sdkVersion(), tools: toolNames })}\n`,
  );
});

// ---------------------------------------------------------------- stdin
function quit() {
  if (child.exitCode !== null || child.signalCode !== null) process.exit(0);
  child.once('exit', () => process.exit(0));
  child.kill('SIGTERM');
  setTimeout(() => {
    child.kill('SIGKILL');
    process.exit(0);
  }, 2000).unref();
}
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (line.trim() === 'quit') quit();
});
rl.on('close', quit);
