-- The Neovim side of tests/neovim/run_e2e_nvim.sh: the real Qwen Code CLI
-- in the plugin's own terminal job, talking to the scripted model.
--   add    :QwenAdd types `@notes.txt (lines 1-2) ` into the terminal, the
--          test types E2E_ADD and Enter into the same job; the model's
--          request holds the file's content (its unique token)
--   diag   the model calls mcp__qwen-companion-plugins__editor-diagnostics
--          (E2E_CALL …); the tool result it gets back holds the diagnostic
--          Neovim reported with vim.diagnostic.set
-- Env: QCNV_TMP, QCNV_WS, QCNV_TIMEOUT, QCNV_MODEL_LOG (the model's JSON
-- lines), QCNV_QWEN_ARGV (JSON list: the qwen command), QCNV_TOKEN.
-- Writes $QCNV_TMP/nv-e2e.json ({"checks": [[id, ok, detail]…]}).

local api = vim.api
local T = assert(os.getenv('QCNV_TMP'))
local WS = assert(os.getenv('QCNV_WS'))
local MODEL_LOG = assert(os.getenv('QCNV_MODEL_LOG'))
local ARGV = vim.json.decode(assert(os.getenv('QCNV_QWEN_ARGV')))
local TOKEN = assert(os.getenv('QCNV_TOKEN'))
local TIMEOUT = tonumber(os.getenv('QCNV_TIMEOUT') or '45') * 1000
local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local E = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/e2e_nvim.lua')
local check = C.check

E.echo_notify()

-- The model's requests (decoded JSON lines), from line `from` on.
local function requests(from)
  return E.requests(MODEL_LOG, from)
end

local function find_request(from, pred)
  for _, r in ipairs(requests(from)) do
    if pred(r) then
      return r
    end
  end
end

local screen = E.screen

local function run()
  vim.cmd('runtime plugin/qwen_companion.lua')
  local qc = require('qwen_companion')
  local term = require('qwen_companion.terminal')
  qc.setup({ terminal = { cmd = ARGV, position = 'float', size = 0.95 }, plugins = { always_load_tools = true } })
  local ok, err = qc.start()
  check('start', ok, err)
  local s = qc.status()
  local tools = s and s.plugins.mcp and s.plugins.mcp.tools or {}
  check('tools-listed', vim.tbl_contains(tools, 'editor-diagnostics'),
    { tools = tools, mcp_error = s and s.plugins.mcp_error, registration = s and s.plugins.registration })

  local notes = WS .. '/notes.txt'
  vim.cmd('edit ' .. vim.fn.fnameescape(notes))
  local buf = api.nvim_get_current_buf()
  local editor_win = api.nvim_get_current_win()
  local ns = api.nvim_create_namespace('e2e')
  vim.diagnostic.set(ns, buf, { {
    lnum = 1, col = 4, end_lnum = 1, end_col = 9, severity = vim.diagnostic.severity.ERROR,
    message = 'E2E_DIAG_' .. TOKEN, source = 'e2e-linter', code = 'X42',
  } })

  local rok, info = term.run({})
  check('terminal', rok, info)
  if not rok then
    return
  end
  local tbuf = info.buf
  local ready = vim.wait(TIMEOUT, function()
    return screen(tbuf):find('Type your message', 1, true) ~= nil
  end, 100)
  check('tui-ready', ready, screen(tbuf))
  if not ready then
    return
  end

  -- add: the reference typed by :QwenAdd, then the words and Enter
  api.nvim_set_current_win(editor_win)
  local n0 = #requests()
  vim.cmd('1,2QwenAdd')
  local typed = '@notes.txt (lines 1-2) '
  check('add-focus', api.nvim_get_current_buf() == tbuf, api.nvim_get_current_buf())
  vim.wait(TIMEOUT, function()
    return screen(tbuf):find('(lines 1-2)', 1, true) ~= nil
  end, 50)
  E.submit(info.job, 'E2E_ADD what does this file say?')
  local req
  vim.wait(TIMEOUT, function()
    req = find_request(n0, function(r)
      return r.main and type(r.last_user_text) == 'string' and r.last_user_text:find('E2E_ADD', 1, true) ~= nil
    end)
    return req ~= nil
  end, 100)
  check('add-prompt', req ~= nil and req.last_user_text:find(typed .. 'E2E_ADD', 1, true) ~= nil,
    req and req.last_user_text or screen(tbuf))
  check('add-content', req ~= nil and req._raw:find('FILE_TOKEN_' .. TOKEN, 1, true) ~= nil,
    req and req._raw:sub(1, 3000) or 'no request with E2E_ADD')
  -- the answer ("ok") is shown before the next prompt is typed
  vim.wait(TIMEOUT, function()
    local r = find_request(n0, function(x)
      return x.last_user_text and x.last_user_text:find('E2E_ADD', 1, true) ~= nil
    end)
    return r ~= nil and screen(tbuf):find('Type your message', 1, true) ~= nil
  end, 100)
  vim.wait(1000)

  -- diag: the model calls the editor-diagnostics tool
  local n1 = #requests()
  E.submit(info.job, 'E2E_CALL name=mcp__qwen-companion-plugins__editor-diagnostics args={}')
  local res
  vim.wait(TIMEOUT, function()
    res = find_request(n1, function(r)
      return r.decision and r.decision.why == 'tool result'
    end)
    return res ~= nil
  end, 100)
  local called = find_request(n1, function(r)
    return r.decision and r.decision.why == 'call'
  end)
  check('diag-call', called ~= nil and called.decision.name == 'mcp__qwen-companion-plugins__editor-diagnostics',
    called and called.decision or screen(tbuf))
  local text = res and (res.body.messages[#res.body.messages].content) or nil
  if type(text) == 'table' then -- a list of parts
    local parts = {}
    for _, part in ipairs(text) do
      parts[#parts + 1] = type(part) == 'table' and part.text or tostring(part)
    end
    text = table.concat(parts, '\n')
  end
  check('diag-result', type(text) == 'string' and text:find('E2E_DIAG_' .. TOKEN, 1, true) ~= nil
    and text:find('e2e-linter', 1, true) ~= nil and text:find(notes, 1, true) ~= nil
    and text:find('"line":2', 1, true) ~= nil and text:find('"column":5', 1, true) ~= nil,
    text or screen(tbuf))
  C.end_job(info.job)
end

E.run_checked(run, C)
C.finish(T .. '/nv-e2e.json')
