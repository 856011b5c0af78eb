// Test driver for the fixture plugins: forks a plugin's entry script with a
// Node IPC channel (as the host does), answers its host_requests
// (show_notification → {shown: true}; render_pdf → writes a stub file and
// answers {}), runs the calls given as JSON and prints one JSON document:
// {results: [...], pushes: [...], hostRequests: [...]}.
//
// usage: node drive_fixture.js PLUGIN_DIR DATA_DIR CALLS_JSON
'use strict';

const { fork } = require('child_process');
const fs = require('fs');
const path = require('path');

const [pluginDir, dataDir, callsJson] = process.argv.slice(2);
const manifest = JSON.parse(fs.readFileSync(path.join(pluginDir, 'manifest.json'), 'utf8'));
const calls = JSON.parse(callsJson);

const child = fork(path.join(pluginDir, manifest.main), [], {
  cwd: pluginDir,
  env: { PATH: process.env.PATH, PLUGIN_DATA_DIR: dataDir },
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  serialization: 'json',
});

const out = { results: [], pushes: [], hostRequests: [] };
const waiting = new Map();
let n = 0;

child.on('message', (msg) => {
  if (msg.type === 'ui_push') {
    out.pushes.push({ channel: msg.channel, payload: msg.payload });
  } else if (msg.type === 'host_request') {
    out.hostRequests.push({ capability: msg.capability, params: msg.params });
    if (msg.capability === 'show_notification') {
      child.send({ type: 'host_response', requestId: msg.requestId, result: { shown: true } });
    } else if (msg.capability === 'render_pdf') {
      fs.writeFileSync(msg.params.outputPath, '%PDF-1.7 stub\n');
      child.send({ type: 'host_response', requestId: msg.requestId, result: {} });
    } else {
      child.send({ type: 'host_error', requestId: msg.requestId, message: `unsupported: ${msg.capability}` });
    }
  } else if (msg.type === 'tool_result' || msg.type === 'tool_error') {
    const w = waiting.get(msg.requestId);
    if (w) {
      waiting.delete(msg.requestId);
      w(msg);
    }
  }
});

function call(c) {
  const requestId = `req-${++n}`;
  return new Promise((resolve) => {
    waiting.set(requestId, resolve);
    child.send({
      type: 'call_tool',
      requestId,
      toolName: c.tool,
      params: c.params || {},
      context: c.context || { cwd: pluginDir },
    });
  });
}

(async () => {
  for (const c of calls) {
    const r = await call(c);
    out.results.push(r);
  }
  // Let pushes sent right after the last result arrive.
  await new Promise((r) => setTimeout(r, 50));
  process.stdout.write(JSON.stringify(out) + '\n');
  child.disconnect();
})().catch((err) => {
  console.error(err);
  child.kill('SIGKILL');
  process.exit(1);
});

setTimeout(() => {
  console.error('driver timed out');
  child.kill('SIGKILL');
  process.exit(2);
}, 20_000).unref();
