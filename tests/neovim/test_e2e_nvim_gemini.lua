-- The Neovim side of tests/neovim/run_e2e_nvim_gemini.sh: the real Gemini CLI
-- in the plugin's own terminal job (:GeminiRun), the plugin with cli = 'gemini',
-- talking to the scripted fake Gemini API (tests/e2e/fake_gemini.py).
--   discovery   start writes Gemini's discovery file (checked by e2e_util.py)
--   gemini-run  :GeminiRun runs gemini in the plugin's terminal (no TERM_PROGRAM)
--   connect     gemini connects (its debug log, the companion's connected clients)
--   context     the file, cursor and visual selection Neovim reports reach the model
--   add-*       :QwenAdd types `@notes.txt ` into the Gemini terminal; the
--               model's request holds the file's unique token
--   diff-opened a model edit (write_file) opens the plugin's diff view, named
--               after Gemini CLI
--   accept      the proposal, edited in Neovim, accepted with :QwenDiffAccept
--   connected   no IDE connection drop in gemini's debug log
--   quit        /quit ends the job
--   stop        :QwenStop removes the discovery file
-- Env: QCNV_TMP, QCNV_WS, QCNV_TIMEOUT, QCNV_MODEL_LOG (the fake API's JSON
-- lines), QCNV_GEMINI_ARGV (JSON list: the gemini command), QCNV_DEBUG_LOG
-- (gemini's debug log), QCNV_TAG, QCNV_PYTHON, QCNV_E2E_UTIL, QCNV_GEMINI_DIR.
-- Writes $QCNV_TMP/nv-e2e-gemini.json ({"checks": […], "gemini_pid": N,
-- "discovery_file": PATH}).

local api = vim.api
local uv = vim.loop
local T = assert(os.getenv('QCNV_TMP'))
local WS = assert(os.getenv('QCNV_WS'))
local MODEL_LOG = assert(os.getenv('QCNV_MODEL_LOG'))
local ARGV = vim.json.decode(assert(os.getenv('QCNV_GEMINI_ARGV')))
local DEBUG_LOG = assert(os.getenv('QCNV_DEBUG_LOG'))
local TAG = assert(os.getenv('QCNV_TAG'))
local PYTHON = assert(os.getenv('QCNV_PYTHON'))
local E2E_UTIL = assert(os.getenv('QCNV_E2E_UTIL'))
local GEMINI_DIR = assert(os.getenv('QCNV_GEMINI_DIR'))
local TIMEOUT = tonumber(os.getenv('QCNV_TIMEOUT') or '45') * 1000
local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local E = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/e2e_nvim.lua')
local check, read = C.check, C.read
local extra = {} -- written next to the checks (gemini's pid, the discovery file)

local notified = {}
E.echo_notify(notified)

local function has(text, needle)
  return type(text) == 'string' and text:find(needle, 1, true) ~= nil
end

-- The fake API's requests (decoded JSON lines), after the first `from`.
local function requests(from)
  return E.requests(MODEL_LOG, from)
end

-- Waits for the first request after `from` that `pred` accepts.
local function wait_request(from, pred)
  local found
  vim.wait(TIMEOUT, function()
    for _, r in ipairs(requests(from)) do
      if pred(r) then
        found = r
        return true
      end
    end
    return false
  end, 100)
  return found
end

local function why(r, w)
  return type(r.decision) == 'table' and r.decision.why == w
end

local screen = E.screen

-- gemini's IDE lines: the tools it discovered, and a connection it dropped.
local function dropped()
  local text = read(DEBUG_LOG) or ''
  local s = text:find('[IDEClient] IDE connection error', 1, true)
    or text:find('[IDEClient] IDE connection closed', 1, true)
  return s and text:sub(s, s + 300) or nil
end
local function discovered()
  for line in (read(DEBUG_LOG) or ''):gmatch('[^\n]+') do
    if line:find('Discovered %d+ tools from IDE: ') then
      return line
    end
  end
end

local submit = E.submit

local function run()
  vim.cmd('runtime plugin/qwen_companion.lua')
  local qc = require('qwen_companion')
  local term = require('qwen_companion.terminal')
  qc.setup({
    cli = 'gemini',
    gemini_command = ARGV,
    terminal = { position = 'float', size = 0.95 },
    plugins = { enabled = false },
    register_mcp = false,
  })
  local readme, main_rs, notes = WS .. '/README.md', WS .. '/src/main.rs', WS .. '/notes.txt'
  vim.cmd('edit ' .. vim.fn.fnameescape(readme))
  vim.cmd('edit ' .. vim.fn.fnameescape(main_rs))
  local editor_win = api.nvim_get_current_win()

  -- discovery: the file Gemini CLI looks for, named after Neovim's pid
  local ok, err = qc.start()
  local s = qc.status()
  local file = s and s.discovery_files and s.discovery_files.gemini
  extra.discovery_file = file
  local report = '(not started: ' .. tostring(err) .. ')'
  local file_ok = false
  if ok and file then
    report = vim.fn.system({ PYTHON, E2E_UTIL, 'check-gemini-file', file, '--port', tostring(s.port), '--workspace',
      WS, '--dir', GEMINI_DIR, '--pid', tostring(vim.fn.getpid()) })
    file_ok = vim.v.shell_error == 0
  end
  check('discovery', ok and file_ok and s.cli == 'gemini' and s.discovery_files.qwen == nil
    and uv.fs_stat(os.getenv('HOME') .. '/.qwen/ide') == nil,
    { report = report, status = s and { cli = s.cli, discovery_files = s.discovery_files } })
  if not (ok and file) then
    return
  end
  io.stdout:write('discovery file: ' .. file .. '\n' .. report)

  -- gemini-run: :GeminiRun, the plugin's own terminal job
  vim.cmd('GeminiRun')
  local t = term.current('gemini')
  check('gemini-run', t ~= nil and api.nvim_get_current_buf() == t.buf and t.env.GEMINI_CLI_IDE_SERVER_PORT
    == tostring(s.port) and t.env.GEMINI_CLI_IDE_PID == tostring(vim.fn.getpid()) and t.env.TERM_PROGRAM == nil
    and vim.env.TERM_PROGRAM == nil and term.last_used() == 'gemini',
    t and { cmd = t.cmd, env = t.env, TERM_PROGRAM = vim.env.TERM_PROGRAM } or 'no Gemini CLI terminal')
  if not t then
    return
  end
  extra.gemini_pid = vim.fn.jobpid(t.job)

  -- connect: gemini finds the file through GEMINI_CLI_IDE_PID and connects
  local line
  vim.wait(TIMEOUT, function()
    line = discovered()
    return line ~= nil and (qc.status().clients or 0) >= 1
  end, 100)
  vim.wait(1000) -- the GET stream opens right after the handshake
  check('connect', line ~= nil and has(line, 'openDiff') and has(line, 'closeDiff') and qc.status().clients == 1
    and dropped() == nil,
    { line = line, clients = qc.status().clients, dropped = dropped(), screen = screen(t.buf) })
  local ready = vim.wait(TIMEOUT, function()
    return has(screen(t.buf), 'Type your message')
  end, 100)
  check('tui-ready', ready, screen(t.buf))
  if not (line and ready) then
    return
  end

  -- context: back in main.rs, a visual selection of the token on line 2;
  -- Neovim stays in Visual mode while the prompt is typed into the job
  api.nvim_set_current_win(editor_win)
  vim.cmd('stopinsert')
  local sel = 'E2E_SELECTED_' .. TAG
  local col = assert(api.nvim_buf_get_lines(0, 1, 2, false)[1]:find(sel, 1, true)) - 1
  api.nvim_win_set_cursor(0, { 2, col })
  vim.cmd('normal! v' .. (#sel - 1) .. 'l')
  vim.cmd('doautocmd <nomodeline> CursorMoved') -- as after each key the user types
  local mode = api.nvim_get_mode().mode
  -- the library has the selection; then its debounce and the notification to gemini
  local in_lib = vim.wait(TIMEOUT, function()
    local ctx = qc.context()
    local files = ctx and ctx.workspaceState and ctx.workspaceState.openFiles or {}
    for _, f in ipairs(files) do
      if f.isActive and f.selectedText == sel then
        return true
      end
    end
    return false
  end, 50)
  vim.wait(1000)
  local n0 = #requests()
  submit(t.job, 'E2E_ASK what is selected in my editor?')
  local r = wait_request(n0, function(x)
    return why(x, 'ask') and has(x.last_user_text, 'what is selected')
  end)
  local want = {
    activeFile = { path = main_rs, cursor = { line = 2, character = col + #sel }, selectedText = sel },
    otherOpenFiles = { readme },
  }
  check('context', mode == 'v' and in_lib and r ~= nil and r.ide_context_kind == 'full' and vim.deep_equal(r.ide_context, want),
    { mode = mode, library = qc.context(), kind = r and r.ide_context_kind, got = r and r.ide_context, want = want })
  vim.wait(TIMEOUT, function()
    return has(screen(t.buf), 'E2E_CONTEXT_ANSWER')
  end, 100)
  api.nvim_feedkeys(api.nvim_replace_termcodes('<Esc>', true, false, true), 'nx', false)

  -- add: :QwenAdd in notes.txt types `@notes.txt ` into the Gemini terminal
  vim.cmd('edit ' .. vim.fn.fnameescape(notes))
  vim.wait(1000)
  local n1 = #requests()
  vim.cmd('QwenAdd')
  check('add-focus', api.nvim_get_current_buf() == t.buf, { current = api.nvim_get_current_buf(), term = t.buf })
  vim.wait(TIMEOUT, function()
    return has(screen(t.buf), '@notes.txt')
  end, 50)
  submit(t.job, 'E2E_ASK add what does this file say?')
  r = wait_request(n1, function(x)
    return why(x, 'ask') and has(x.last_user_text, 'E2E_ASK add')
  end)
  check('add-prompt', r ~= nil and has(r.last_user_text, '@notes.txt E2E_ASK add'),
    r and r.last_user_text or screen(t.buf))
  check('add-content', r ~= nil and has(r._raw, 'FILE_TOKEN_' .. TAG),
    r and r._raw:sub(1, 3000) or 'no request with E2E_ASK add')
  vim.wait(TIMEOUT, function()
    local sc = screen(t.buf)
    local _, n = sc:gsub('E2E_CONTEXT_ANSWER', '')
    return n >= 2 and has(sc, 'Type your message')
  end, 100)
  vim.wait(1000)

  -- diff-opened: the model writes e2e_accept.txt; the plugin shows the diff
  local path = WS .. '/e2e_accept.txt'
  local token = 'E2E_ACCEPT_' .. TAG
  local n2 = #requests()
  submit(t.job, 'E2E_WRITE path=' .. path .. ' content=' .. token)
  local d
  vim.wait(TIMEOUT, function()
    for _, x in ipairs(qc.status().diffs) do
      if x.path == path then
        d = x
      end
    end
    return d ~= nil and d.buf ~= nil and api.nvim_buf_is_valid(d.buf)
  end, 100)
  local lines = d and d.buf and api.nvim_buf_is_valid(d.buf) and api.nvim_buf_get_lines(d.buf, 0, -1, false) or nil
  -- the view and its message name Gemini CLI as the proposer
  local sl = lines and vim.wo[api.nvim_get_current_win()].statusline
  local said = vim.tbl_filter(function(m)
    return has(m, 'proposes changes to e2e_accept.txt')
  end, notified)
  check('diff-opened', lines ~= nil and vim.deep_equal(lines, { token }) and api.nvim_get_current_buf() == d.buf
    and api.nvim_buf_get_name(d.buf) == 'qwen-diff://' .. path and uv.fs_stat(path) == nil
    and has(sl, 'Gemini CLI proposes e2e_accept.txt') and #said == 1 and has(said[1], 'Gemini CLI proposes'),
    { diffs = qc.status().diffs, lines = lines, statusline = sl, said = said, screen = screen(t.buf) })
  if not lines then
    return
  end

  -- accept: the user edits the proposal, then :QwenDiffAccept
  local edit = '// edited in Neovim before accepting (' .. TAG .. ')'
  api.nvim_buf_set_lines(d.buf, 1, 1, false, { edit })
  vim.cmd('QwenDiffAccept ' .. vim.fn.fnameescape(path))
  local want_text = token .. '\n' .. edit .. '\n'
  vim.wait(TIMEOUT, function()
    return read(path) == want_text
  end, 100)
  local res = wait_request(n2, function(x)
    return why(x, 'tool result') and has(x.decision.text, 'edited in Neovim before accepting (' .. TAG .. ')')
  end)
  check('accept', read(path) == want_text and res ~= nil and #qc.status().diffs == 0,
    { on_disk = read(path), want = want_text, tool_result = res and res.decision.text, diffs = qc.status().diffs })
  vim.wait(TIMEOUT, function()
    return has(screen(t.buf), 'E2E_FINAL_ANSWER')
  end, 100)
  vim.wait(1000)

  check('connected', dropped() == nil, dropped())

  -- quit: /quit ends gemini's job
  local job = t.job
  submit(job, '/quit')
  local code = vim.fn.jobwait({ job }, TIMEOUT)[1]
  check('quit', code == 0, { exit = code, screen = screen(t.buf) })
  if code == -1 then
    C.end_job(job)
  end

  -- stop: :QwenStop removes the discovery file
  vim.cmd('QwenStop')
  check('stop', qc.status() == nil and uv.fs_stat(file) == nil, { status = qc.status(), file = file })
end

E.run_checked(run, C)
C.write(T .. '/nv-e2e-gemini.json')
local f = assert(io.open(T .. '/nv-e2e-gemini.extra.json', 'w'))
f:write(vim.fn.json_encode(extra))
f:close()
vim.cmd('qall!')
