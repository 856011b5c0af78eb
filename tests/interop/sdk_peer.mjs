#!/usr/bin/env node
// A `PeerEndpoint` from the official `@qwen-code/sdk/peer` (pinned 0.1.14), driven
// by JSON lines, for tests/interop/run_sessions.sh. Only the SDK's public API is used.
//
//   node sdk_peer.mjs --sdk DIR --name NAME [--qwen-home H] [--no-on-message]
//                     [--controller-token T]
//
// --sdk DIR is the directory holding node_modules/@qwen-code/sdk.
// --no-on-message starts the endpoint without `onMessage` (it then answers `refused`).
//
// stdout, one JSON object per line:
//   {"event":"ready","name","ref","sessionId","ipcPath","recordPath","pid","sdkVersion"}
//   {"event":"message","msgId","content","fromName","fromMode","from","priority"}
//   {"event":"receipt","msgId","address","status","previous","reason","dropReason"}  (onReceipt)
//   {"event":"send_result","id","kind","msgId","peer","code","reason","matches","suggestions"}
//   {"event":"awaited","id","msgId","status","previous","reason"}   (awaitReceipt; status null on timeout)
//   {"event":"list","id","sessions":[...]}
//   {"event":"error","id","message"}
//   {"event":"closed"}
// stdin, one JSON object per line:
//   {"cmd":"send","id":"x","to":"ADDR","content":"TEXT","fromMode":"prompting"|"bypass",
//    "controller":true,"final":true,"timeoutMs":15000}
//        send, print send_result, then (unless "await":false) awaitReceipt -> awaited
//   {"cmd":"list","id":"x"}
//   {"cmd":"stop"}                  close the endpoint and exit 0 (EOF does the same)
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}
const flag = (name) => process.argv.includes(name);

const sdkDir = arg('--sdk');
const name = arg('--name');
if (!sdkDir || !name) {
  process.stderr.write('usage: sdk_peer.mjs --sdk DIR --name NAME [--qwen-home H] [--no-on-message] [--controller-token T]\n');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(sdkDir), 'package.json'));
const sdk = require('@qwen-code/sdk/peer');
const sdkVersion = require('@qwen-code/sdk/package.json').version;

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

const options = {
  name,
  cwd: process.cwd(),
  onReceipt: (r) =>
    out({ event: 'receipt', msgId: r.msgId, address: r.address, status: r.status,
          previous: r.previous, reason: r.reason ?? null, dropReason: r.dropReason ?? null }),
  onError: (e) => out({ event: 'error', id: null, message: String(e && e.message || e) }),
};
const home = arg('--qwen-home');
if (home) options.qwenHome = home;
const controllerToken = arg('--controller-token');
if (controllerToken) options.controllerToken = controllerToken;
if (!flag('--no-on-message')) {
  options.onMessage = (m) =>
    out({ event: 'message', msgId: m.msgId, content: m.content, fromName: m.fromName ?? null,
          fromMode: m.fromMode ?? null, from: m.from ?? null, priority: m.priority });
}

let endpoint;
try {
  endpoint = await sdk.PeerEndpoint.start(options);
} catch (e) {
  out({ event: 'error', id: null, message: 'start failed: ' + String(e && e.message || e) });
  process.exit(1);
}
out({ event: 'ready', name: endpoint.name, ref: endpoint.ref, sessionId: endpoint.sessionId,
      ipcPath: endpoint.ipcPath, recordPath: endpoint.recordPath, pid: process.pid, sdkVersion });

let stopping = false;
async function stop(code) {
  if (stopping) return;
  stopping = true;
  try { await endpoint.close(); } catch (e) { out({ event: 'error', id: null, message: 'close: ' + e }); }
  out({ event: 'closed' });
  process.exit(code);
}

async function doSend(c) {
  const opts = { to: c.to, content: c.content };
  if (c.fromMode) opts.fromMode = c.fromMode;
  if (c.controller) opts.controller = true;
  if (c.priority) opts.priority = c.priority;
  const r = await endpoint.send(opts);
  out({ event: 'send_result', id: c.id ?? null, kind: r.kind, msgId: r.msgId ?? null,
        peer: r.peer ?? null, code: r.code ?? null, reason: r.reason ?? null,
        matches: r.matches ?? null, suggestions: r.suggestions ?? null });
  if (r.kind !== 'sent' || c.await === false) return;
  const rec = await endpoint.awaitReceipt(r.msgId, { timeoutMs: c.timeoutMs ?? 15000, final: !!c.final });
  out({ event: 'awaited', id: c.id ?? null, msgId: r.msgId, status: rec ? rec.status : null,
        previous: rec ? rec.previous : null, reason: rec ? rec.reason ?? null : null });
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (!line.trim()) return;
  let c;
  try { c = JSON.parse(line); } catch { out({ event: 'error', id: null, message: 'bad command line' }); return; }
  const fail = (e) => out({ event: 'error', id: c.id ?? null, message: String(e && e.message || e) });
  switch (c.cmd) {
    case 'send': doSend(c).catch(fail); break;
    case 'list':
      endpoint.list().then((s) => out({ event: 'list', id: c.id ?? null, sessions: s })).catch(fail);
      break;
    case 'stop': stop(0); break;
    default: fail('unknown command ' + c.cmd);
  }
});
rl.on('close', () => stop(0));
process.on('SIGTERM', () => stop(143));
