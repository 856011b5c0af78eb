// Test-only preload for Windows Node under Wine 8 (NODE_OPTIONS=--require <this file>).
//
// Wine 8.0's Winsock does not know setsockopt(IPPROTO_TCP, TCP_KEEPALIVE) ("fixme:winsock:
// setsockopt Unknown IPPROTO_TCP optname 0x00000003"). libuv applies a keep-alive that was
// requested before the socket connected as part of the connect, so there the failure fails
// the connect itself ("connect UNKNOWN 127.0.0.1:<port>"); undici (Node's fetch, used by the
// Qwen Code CLI for the model and for MCP) asks for keep-alive exactly then. Real Windows
// supports the option. This file defers such a request until the socket has connected,
// where Node ignores a failed keep-alive as it does on every platform. Nothing else changes.
'use strict';
const net = require('net');
const original = net.Socket.prototype.setKeepAlive;
net.Socket.prototype.setKeepAlive = function setKeepAlive(enable, initialDelay) {
  if (this.connecting) {
    this.once('connect', () => original.call(this, enable, initialDelay));
    return this;
  }
  return original.call(this, enable, initialDelay);
};
