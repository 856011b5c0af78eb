// Node baseline of `cargo bench --bench plugins`: what the desktop app's Electron host does to
// run a plugin — plain `child_process.fork` of the plugin's main script with an IPC channel
// (json serialization), `child.send(call_tool)` → the child's `'message'` — with no npm
// dependency.
//
//   node fork_parent.mjs <plugin-dir> <calls> <warmup> <cold> <rssN>
//
// Prints ONE JSON line on stdout:
//   {"node": version, "roundTripUs": [..calls..], "coldUs": [..cold..],
//    "rssBeforeKb": n, "rssAfterKb": n, "rssChildren": rssN}
// roundTripUs: `child.send({type:"call_tool",…})` → the matching tool_result in 'message', one
//   call at a time on one warm child (after <warmup> unmeasured calls).
// coldUs: `fork()` → the first tool_result of a call sent right after the fork (a fresh child
//   each time; the child is ended and reaped before the next iteration).
// rss*: this process's RSS before and after forking <rssN> children that each answered one
//   call (the children's own memory is not in it); run with --expose-gc so both are read after
//   a full GC.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const [dir, calls, warmup, cold, rssN] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
const main = path.join(dir, manifest.main);
let seq = 0;

function spawn() {
  // silent: stdout/stderr piped (as the app does, to collect logs); drained below.
  const child = fork(main, [], {
    cwd: dir,
    silent: true,
    serialization: 'json',
    env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
  });
  child.stdout.resume();
  child.stderr.resume();
  return child;
}

function call(child, text) {
  const requestId = `r${++seq}`;
  return new Promise((resolve, reject) => {
    const onMessage = (msg) => {
      if (!msg || msg.requestId !== requestId) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (msg.type === 'tool_result') resolve(msg);
      else reject(new Error(`tool_error: ${msg.message}`));
    };
    const onExit = (code, signal) => reject(new Error(`child exited (${code}, ${signal})`));
    child.on('message', onMessage);
    child.on('exit', onExit);
    child.send({
      type: 'call_tool',
      requestId,
      toolName: 'echo',
      params: { text },
      context: { cwd: '' },
    });
  });
}

function end(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

const usSince = (t0) => Number(process.hrtime.bigint() - t0) / 1000;
const rssKb = () => Math.round(process.memoryUsage().rss / 1024);

const out = { node: process.version, roundTripUs: [], coldUs: [] };

// 1. warm round trips
{
  const child = spawn();
  for (let i = 0; i < Number(warmup); i++) await call(child, `warm ${i}`);
  for (let i = 0; i < Number(calls); i++) {
    const t0 = process.hrtime.bigint();
    await call(child, `call ${i}`);
    out.roundTripUs.push(usSince(t0));
  }
  await end(child);
}

// 2. cold: fork → first result
for (let i = 0; i < Number(cold); i++) {
  const t0 = process.hrtime.bigint();
  const child = spawn();
  await call(child, `cold ${i}`);
  out.coldUs.push(usSince(t0));
  await end(child);
}

// 3. RSS growth per running child
{
  global.gc?.();
  out.rssBeforeKb = rssKb();
  const children = [];
  for (let i = 0; i < Number(rssN); i++) children.push(spawn());
  await Promise.all(children.map((c, i) => call(c, `rss ${i}`)));
  global.gc?.();
  out.rssAfterKb = rssKb();
  out.rssChildren = Number(rssN);
  await Promise.all(children.map(end));
}

process.stdout.write(JSON.stringify(out) + '\n');
