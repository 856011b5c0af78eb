// Benchmark baseline for qwen-companion: an IDE companion MCP server built on the
// same stack as the official VS Code companion (express + @modelcontextprotocol/sdk
// StreamableHTTPServerTransport, stateful sessions, bearer auth). Written for the
// benchmark; it is not a copy of the extension's code.
//
// Protocol with the benchmark driver:
//   stdout, first line : {"port":N,"token":"...","rssIdleKb":N,"rssListeningKb":N}
//   stdin, one command a line:
//     cursor L C  -> move the cursor of the active file; after a 50 ms trailing
//                    debounce an `ide/contextUpdate` notification goes to every
//                    open GET stream
//     rss         -> prints {"rssKb":N} on stdout
//     quit        -> exits
//
// Environment: BASELINE_DEBOUNCE_MS (default 50), BASELINE_WORKSPACE (default cwd).

import { readFileSync } from 'node:fs';

function rssKb() {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : -1;
}

// RSS of an idle node, before any module of the server is loaded.
const rssIdleKb = rssKb();

const { randomUUID, randomBytes, timingSafeEqual } = await import('node:crypto');
const { createInterface } = await import('node:readline');
const { default: express } = await import('express');
const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = await import(
  '@modelcontextprotocol/sdk/server/streamableHttp.js'
);
const { isInitializeRequest } = await import('@modelcontextprotocol/sdk/types.js');
const { z } = await import('zod');

const DEBOUNCE_MS = Number(process.env.BASELINE_DEBOUNCE_MS ?? 50);
const WORKSPACE = process.env.BASELINE_WORKSPACE ?? process.cwd();
const ACTIVE_FILE = `${WORKSPACE}/src/main.rs`;
const token = randomBytes(32).toString('hex');

// ---------------------------------------------------------------- IDE context
const context = {
  workspaceState: {
    openFiles: [
      {
        path: ACTIVE_FILE,
        timestamp: Date.now(),
        isActive: true,
        cursor: { line: 1, character: 1 },
      },
    ],
    isTrusted: true,
  },
};

/** sessionId -> { transport, server, streamOpen } */
const sessions = new Map();

function sendContext(entry) {
  entry.server.server
    .notification({ method: 'ide/contextUpdate', params: context })
    .catch(() => {});
}

function broadcastContext() {
  for (const entry of sessions.values()) {
    if (entry.streamOpen) sendContext(entry);
  }
}

let debounceTimer;
function contextChanged() {
  clearTimeout(debounceTimer);
  debounceTimer = setTimeout(broadcastContext, DEBOUNCE_MS);
}

// ---------------------------------------------------------------- MCP server
function createMcpServer() {
  const server = new McpServer(
    { name: 'qwen-companion-node-baseline', version: '0.0.0' },
    { capabilities: { logging: {} } },
  );
  server.registerTool(
    'openDiff',
    {
      description: 'Open a diff view to create a file or modify an existing one.',
      inputSchema: { filePath: z.string(), newContent: z.string() },
    },
    async () => ({ content: [] }),
  );
  server.registerTool(
    'closeDiff',
    {
      description: 'Close an open diff view for a file.',
      inputSchema: { filePath: z.string(), suppressNotification: z.boolean().optional() },
    },
    async () => ({
      content: [{ type: 'text', text: JSON.stringify({ content: 'closed\n' }) }],
    }),
  );
  return server;
}

// ---------------------------------------------------------------- HTTP
const app = express();
app.use(express.json({ limit: '10mb' }));

let port = 0;
const expectedAuth = Buffer.from(`Bearer ${token}`);
app.use((req, res, next) => {
  const host = req.headers.host ?? '';
  if (host !== `localhost:${port}` && host !== `127.0.0.1:${port}`) {
    res.status(403).json({ error: 'Invalid Host header' });
    return;
  }
  const auth = Buffer.from(req.headers.authorization ?? '');
  if (auth.length !== expectedAuth.length || !timingSafeEqual(auth, expectedAuth)) {
    res.status(401).send('Unauthorized');
    return;
  }
  next();
});

function jsonRpcError(res, status, message) {
  res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

app.post('/mcp', async (req, res) => {
  const sid = req.headers['mcp-session-id'];
  let entry = typeof sid === 'string' ? sessions.get(sid) : undefined;
  if (!entry) {
    if (sid !== undefined || !isInitializeRequest(req.body)) {
      jsonRpcError(res, 400, 'Bad Request: no valid session ID');
      return;
    }
    const server = createMcpServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, entry);
      },
    });
    entry = { transport, server, streamOpen: false };
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
  }
  await entry.transport.handleRequest(req, res, req.body);
});

async function sessionRequest(req, res) {
  const sid = req.headers['mcp-session-id'];
  const entry = typeof sid === 'string' ? sessions.get(sid) : undefined;
  if (!entry) {
    jsonRpcError(res, 400, 'Bad Request: no valid session ID');
    return;
  }
  if (req.method === 'GET') {
    // handleRequest() for GET resolves only when the stream closes, so the initial
    // context goes out once the response headers are on the wire.
    entry.streamOpen = true;
    res.on('close', () => {
      entry.streamOpen = false;
    });
    setImmediate(() => sendContext(entry));
  }
  await entry.transport.handleRequest(req, res);
}
app.get('/mcp', sessionRequest);
app.delete('/mcp', sessionRequest);

// Keep GET streams alive (the CLI drops a stream after 300 s of silence).
setInterval(() => {
  for (const entry of sessions.values()) {
    if (entry.streamOpen) entry.server.server.notification({ method: 'ping' }).catch(() => {});
  }
}, 30_000).unref();

const httpServer = app.listen(0, '127.0.0.1', () => {
  port = httpServer.address().port;
  process.stdout.write(
    `${JSON.stringify({ port, token, rssIdleKb, rssListeningKb: rssKb() })}\n`,
  );
});

// ---------------------------------------------------------------- stdin commands
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const parts = line.trim().split(/\s+/);
  switch (parts[0]) {
    case 'cursor': {
      const f = context.workspaceState.openFiles[0];
      f.cursor = { line: Number(parts[1]), character: Number(parts[2]) };
      f.timestamp = Date.now();
      contextChanged();
      break;
    }
    case 'rss':
      process.stdout.write(`${JSON.stringify({ rssKb: rssKb() })}\n`);
      break;
    case 'quit':
      process.exit(0);
      break;
    default:
      break;
  }
});
rl.on('close', () => process.exit(0));
