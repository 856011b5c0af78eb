// Benchmark plugin: answers every call_tool at once with a tool_result, nothing else.
process.on('message', (msg) => {
  if (!msg || msg.type !== 'call_tool') return;
  const { requestId, toolName, params } = msg;
  if (toolName !== 'echo') {
    process.send({ type: 'tool_error', requestId, message: `unknown tool: ${toolName}` });
    return;
  }
  process.send({
    type: 'tool_result',
    requestId,
    content: [{ type: 'text', text: String(params && params.text) }],
  });
});
