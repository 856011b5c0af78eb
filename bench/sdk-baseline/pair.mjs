// Baseline for `cargo bench --bench sessions`: send -> `delivered` receipt latency
// between two official `@qwen-code/sdk` PeerEndpoints in this one Node process.
//
// The schedule is the one the Rust side uses for ours: `rounds` rounds, each in a
// fresh Qwen home (registry dir) with a fresh receiver ("bench-rx") and sender
// ("bench-tx"); per round `warmup` unmeasured then `perRound` measured messages,
// sent one at a time, each with a distinct body and `fromMode: "prompting"`.
// Latency = from just before `send()` to the `onReceipt` callback with status
// `delivered` (stamped inside the callback). The `send()` resolve time is reported too.
//
// Input: one JSON argument {rounds, perRound, warmup, baseDir, timeoutMs}.
// Output: one JSON line {receiptUs:[...], sendUs:[...], received, errors:[...], node, sdk}.
// Exits on its own; every endpoint is closed and every home dir removed.

import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { createRequire } from 'node:module';
import { PeerEndpoint } from '@qwen-code/sdk/peer';

const cfg = JSON.parse(process.argv[2] ?? '{}');
const rounds = cfg.rounds ?? 8;
const perRound = cfg.perRound ?? 25;
const warmup = cfg.warmup ?? 3;
const baseDir = cfg.baseDir ?? '/tmp';
const timeoutMs = cfg.timeoutMs ?? 5000;

const now = () => process.hrtime.bigint();
const us = (a, b) => Number(b - a) / 1000;

function sdkVersion() {
  try {
    const require = createRequire(import.meta.url);
    const main = require.resolve('@qwen-code/sdk');
    let dir = dirname(main);
    for (let i = 0; i < 4; i++) {
      try {
        const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
        if (pkg.name === '@qwen-code/sdk') return pkg.version;
      } catch {}
      dir = dirname(dir);
    }
  } catch {}
  return 'unknown';
}

const receiptUs = [];
const sendUs = [];
const errors = [];
let received = 0;

for (let r = 0; r < rounds; r++) {
  const home = mkdtempSync(join(baseDir, 'qcsb-sdk-'));
  const stamps = new Map(); // msgId -> hrtime of the delivered receipt
  const waiters = new Map(); // msgId -> resolve
  let rx, tx;
  try {
    rx = await PeerEndpoint.start({
      name: 'bench-rx',
      qwenHome: home,
      cwd: '/bench/bench-rx',
      socketPath: join(home, 'rx.sock'),
      onMessage: () => {
        received++;
      },
    });
    tx = await PeerEndpoint.start({
      name: 'bench-tx',
      qwenHome: home,
      cwd: '/bench/bench-tx',
      socketPath: join(home, 'tx.sock'),
      onReceipt: (rec) => {
        if (rec.status !== 'delivered') {
          errors.push(`round ${r}: ${rec.msgId} -> ${rec.status}`);
          return;
        }
        const t = now();
        stamps.set(rec.msgId, t);
        const w = waiters.get(rec.msgId);
        if (w) w(t);
      },
    });
    for (let i = 0; i < warmup + perRound; i++) {
      const t0 = now();
      const res = await tx.send({
        to: 'bench-rx',
        content: `bench round ${r} message ${i}: the build finished with 0 failures`,
        fromMode: 'prompting',
      });
      const t1 = now();
      if (res.kind !== 'sent') {
        errors.push(`round ${r} message ${i}: send ${res.kind} ${res.reason ?? ''}`);
        continue;
      }
      let t2 = stamps.get(res.msgId);
      if (t2 === undefined) {
        t2 = await new Promise((resolve) => {
          const timer = setTimeout(() => resolve(undefined), timeoutMs);
          waiters.set(res.msgId, (t) => {
            clearTimeout(timer);
            resolve(t);
          });
        });
        waiters.delete(res.msgId);
      }
      if (t2 === undefined) {
        errors.push(`round ${r} message ${i}: no delivered receipt in ${timeoutMs} ms`);
        continue;
      }
      if (i >= warmup) {
        receiptUs.push(us(t0, t2));
        sendUs.push(us(t0, t1));
      }
    }
  } catch (e) {
    errors.push(`round ${r}: ${e?.stack ?? e}`);
  } finally {
    try { await tx?.close(); } catch {}
    try { await rx?.close(); } catch {}
    rmSync(home, { recursive: true, force: true });
  }
}

process.stdout.write(
  JSON.stringify({ receiptUs, sendUs, received, errors, node: process.version, sdk: sdkVersion() }) + '\n',
);
process.exit(0);
