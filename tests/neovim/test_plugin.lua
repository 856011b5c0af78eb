-- Headless Neovim side of tests/neovim/run.sh.
--
-- Runs the plugin as a user would (commands, autocmds fired by real events,
-- typed keys) in phases. After each phase it writes $QCNV_TMP/nv-<phase>.json
-- ({checks = {{name, ok, detail}...}, ...}); run.sh checks the outside world
-- (lock file, MCP notifications) and then creates $QCNV_TMP/go-<next> to let
-- the next phase run. Every step returns to Neovim's main loop, so
-- CursorMoved / ModeChanged / BufEnter fire as they do for a user.

local uv = vim.uv or vim.loop
local api = vim.api

local T = assert(os.getenv('QCNV_TMP'), 'QCNV_TMP')
local WS = assert(os.getenv('QCNV_WS'), 'QCNV_WS')
local STEP_TIMEOUT_MS = tonumber(os.getenv('QCNV_TIMEOUT') or '30') * 1000
-- The plugin's request_timeout_ms (run.sh sets it short, so diff 7 is quick).
local REQUEST_TIMEOUT_MS = tonumber(os.getenv('QCNV_REQUEST_TIMEOUT_MS') or '3000')

local MAIN = WS .. '/main.c'
local NEW = WS .. '/new.txt'
local OTHER = WS .. '/other.txt'
local PROPOSAL_1 = '#include <stdio.h>\nint main(void) {\n    return 0;\n}\n'

local P = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/phases.lua')(T, 'nv-', 'go-')
local check, emit, exists, go, read = P.check, P.emit, P.exists, P.go, P.read

local qc -- the plugin module
local capi -- qwen_companion.capi
local lib_calls = {} -- qc_ function name -> number of lookups through the library namespace

local function diff_buf(path)
  for _, d in ipairs((qc.status() or {}).diffs or {}) do
    if d.path == path and d.buf and api.nvim_buf_is_valid(d.buf) then
      return d.buf
    end
  end
end

local function no_diffs()
  local s = qc.status()
  return s ~= nil and #s.diffs == 0
end

local function buf_text(buf)
  return table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n') .. '\n'
end

local function win_of(buf)
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(w) == buf then
      return w
    end
  end
end

local function keys(s)
  api.nvim_feedkeys(api.nvim_replace_termcodes(s, true, false, true), 'n', false)
end

local function context_paths()
  local ctx = qc.context() or {}
  local paths = {}
  for _, f in ipairs((ctx.workspaceState or {}).openFiles or {}) do
    paths[#paths + 1] = f.path
  end
  return paths
end

-- Steps: { name, run, wait } ; `wait` (optional) is polled until true.
local steps = {}
local function step(name, run, wait)
  steps[#steps + 1] = { name = name, run = run, wait = wait }
end

step('load', function()
  vim.cmd('runtime plugin/qwen_companion.lua')
  check('plugin defines :QwenStart', vim.fn.exists(':QwenStart') == 2)
  check('plugin defines :QwenDiffAccept', vim.fn.exists(':QwenDiffAccept') == 2)
  qc = require('qwen_companion')
  capi = require('qwen_companion.capi')
  -- request_timeout_ms reaches the library as requestTimeoutMs (which checks its range)
  qc.setup({ lock_dir = T .. '/locks', autostart = false, request_timeout_ms = 50 })
  local sok, serr = qc.start()
  check('request_timeout_ms = 50 is refused by the library (requestTimeoutMs: 100..600000)',
    not sok and tostring(serr):find('requestTimeoutMs', 1, true) ~= nil and qc.status() == nil, serr)
  qc.setup({ request_timeout_ms = REQUEST_TIMEOUT_MS })
  -- Every library function the plugin calls goes through the namespace
  -- capi.load returns (capi.call does lib[name](...)): record each lookup.
  P.count_lib_calls(capi, lib_calls)
  local lib, err = capi.load('/nonexistent/libqwen_companion.so')
  check('loading a missing library fails with a message', lib == nil and err:find('cannot load', 1, true), err)
  lib = assert(capi.load(capi.library_path()))
  local ok, aerr = capi.check_abi(lib, capi.ABI_VERSION + 1)
  check('ABI check refuses another ABI version', not ok and aerr:find('ABI', 1, true), aerr)
  check('ABI check accepts this library', capi.check_abi(lib) == true)
  check('not running before :QwenStart', qc.status() == nil and vim.env.QWEN_CODE_IDE_SERVER_PORT == nil)
end)

step('start', function()
  vim.cmd('QwenStart')
  local s = qc.status()
  check(':QwenStart runs the companion', s ~= nil)
  check('pull mode: the event fd is watched (diffs enabled)', s and s.diffs_enabled and type(s.event_fd) == 'number'
    and s.event_fd >= 0, s)
  check('qc_companion_enable_events was called once', lib_calls.qc_companion_enable_events == 1, lib_calls)
  check('vim.env.QWEN_CODE_IDE_SERVER_PORT is the port', s and vim.env.QWEN_CODE_IDE_SERVER_PORT == tostring(s.port),
    vim.env.QWEN_CODE_IDE_SERVER_PORT)
  check('vim.env.QWEN_CODE_IDE_WORKSPACE_PATH is the cwd', vim.env.QWEN_CODE_IDE_WORKSPACE_PATH == WS,
    vim.env.QWEN_CODE_IDE_WORKSPACE_PATH)
  check('the lock file is in the configured lock dir', s and s.lock_file == T .. '/locks/' .. s.port .. '.lock', s)
  vim.cmd('tabnew')
  vim.fn.termopen({ 'sh', '-c', 'printf "%s|%s" "$QWEN_CODE_IDE_SERVER_PORT" "$QWEN_CODE_IDE_WORKSPACE_PATH" >"$0.tmp" && mv "$0.tmp" "$0"', T .. '/term-env.txt' })
end, function()
  return exists(T .. '/term-env.txt')
end)

step('started', function()
  local s = qc.status()
  check(':terminal inherits both variables', read(T .. '/term-env.txt') == s.port .. '|' .. WS, read(T .. '/term-env.txt'))
  vim.cmd('bwipeout!') -- the terminal (and its tab)
  emit('started', { port = s.port, lock_file = s.lock_file, env = s.env })
end, go('context'))

step('focus and cursor', function()
  vim.cmd('edit ' .. vim.fn.fnameescape(MAIN))
  api.nvim_win_set_cursor(0, { 3, 4 }) -- line 3, 5th character
end)

step('cursor', function()
  local ctx = qc.context()
  local f = ctx.workspaceState.openFiles[1]
  check('library context: main.c active at line 3, character 5', f and f.path == MAIN and f.isActive
    and f.cursor.line == 3 and f.cursor.character == 5, ctx)
  emit('cursor')
end, go('select'))

step('visual selection', function()
  api.nvim_win_set_cursor(0, { 2, 4 })
  keys('vj') -- from "main(void) {" on line 2 to the "r" of line 3
end, function()
  return api.nvim_get_mode().mode == 'v' and api.nvim_win_get_cursor(0)[1] == 3
end)

step('selected', function()
  emit('select')
end, go('unselect'))

step('leave visual', function()
  keys('<Esc>')
end, function()
  return api.nvim_get_mode().mode == 'n'
end)

step('unselected', function()
  emit('unselect')
end, go('diff1'))

-- diff 1: shown side by side, edited, accepted with :QwenDiffAccept
step('diff1 shown', function() end, function()
  return diff_buf(MAIN) ~= nil
end)

step('diff1 accept', function()
  local buf = diff_buf(MAIN)
  check('diff 1: proposal shown in a qwen-diff:// buffer', api.nvim_buf_get_name(buf) == 'qwen-diff://' .. MAIN,
    api.nvim_buf_get_name(buf))
  check('diff 1: the buffer holds the proposed text', buf_text(buf) == PROPOSAL_1, buf_text(buf))
  check('diff 1: opened in its own tab', #api.nvim_list_tabpages() == 2, #api.nvim_list_tabpages())
  local wins = api.nvim_tabpage_list_wins(0)
  local diffwins = 0
  for _, w in ipairs(wins) do
    if vim.wo[w].diff then
      diffwins = diffwins + 1
    end
  end
  check('diff 1: both windows are in diff mode', #wins == 2 and diffwins == 2, { wins = #wins, diff = diffwins })
  check('diff 1: the proposal window has the focus', api.nvim_get_current_buf() == buf)
  api.nvim_buf_set_lines(buf, -1, -1, false, { '// reviewed in neovim' })
  vim.cmd('QwenDiffAccept')
  check('diff 1: :QwenDiffAccept settles it', no_diffs(), qc.status())
  check('diff 1: its tab is closed', #api.nvim_list_tabpages() == 1, #api.nvim_list_tabpages())
  check('diff 1: the proposal buffer is wiped', not api.nvim_buf_is_valid(buf))
  emit('diff1')
end, go('diff2'))

-- diff 2: a new file, rejected by path
step('diff2 shown', function() end, function()
  return diff_buf(NEW) ~= nil
end)

step('diff2 reject', function()
  local buf = diff_buf(NEW)
  local other
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(w) ~= buf then
      other = api.nvim_win_get_buf(w)
    end
  end
  check('diff 2 (new file): compared with an empty scratch buffer',
    other and vim.bo[other].buftype == 'nofile' and buf_text(other) == '\n', other and buf_text(other))
  vim.cmd('QwenDiffReject ' .. vim.fn.fnameescape(NEW))
  check('diff 2: :QwenDiffReject PATH settles it', no_diffs())
  check('diff 2: no scratch buffer left', other and not api.nvim_buf_is_valid(other))
  emit('diff2')
end, go('diff3'))

-- diff 3: edited, then the CLI closes it (closeDiff answers the edited text)
step('diff3 shown', function() end, function()
  return diff_buf(MAIN) ~= nil
end)

step('diff3 edit', function()
  local buf = diff_buf(MAIN)
  api.nvim_buf_set_lines(buf, 0, 1, false, { '// edited in neovim' })
  emit('diff3-edited')
end, no_diffs)

step('diff3 closed by the CLI', function()
  check('diff 3: closeDiff closed the view', #api.nvim_list_tabpages() == 1, #api.nvim_list_tabpages())
  emit('diff3')
end, go('diff4'))

-- diff 4: the user closes the proposal window without deciding
step('diff4 shown', function() end, function()
  return diff_buf(MAIN) ~= nil
end)

step('diff4 quit', function()
  api.nvim_set_current_win(win_of(diff_buf(MAIN)))
  vim.cmd('quit')
end, no_diffs)

step('diff4 closed', function()
  emit('diff4')
end, go('diff5'))

-- diff 5: :w in the proposal buffer accepts it
step('diff5 shown', function() end, function()
  return diff_buf(MAIN) ~= nil
end)

step('diff5 write', function()
  api.nvim_set_current_win(win_of(diff_buf(MAIN)))
  vim.cmd('write')
  check('diff 5: :w accepted it', no_diffs())
  check('diff 5: the file on disk is untouched (the CLI writes it)', read(MAIN):find('return 42', 1, true) ~= nil)
  emit('diff5')
end, go('diff6'))

-- diff 6: closeDiff while Neovim's main thread is busy: it is answered as
-- soon as the main loop runs again, with the buffer's (edited) text.
step('diff6 shown', function() end, function()
  return diff_buf(MAIN) ~= nil
end)

step('diff6 busy', function()
  api.nvim_buf_set_lines(diff_buf(MAIN), 0, 1, false, { 'six, edited' })
  emit('diff6-busy')
  os.execute('sleep 2') -- blocks the main thread (less than the request timeout): no event is processed
end, no_diffs) -- then the queued close request is pulled and answered

step('diff6 closed late', function()
  check('diff 6: the late closeDiff still closed the view', #api.nvim_list_tabpages() == 1, #api.nvim_list_tabpages())
  emit('diff6')
end, go('diff7'))

-- diff 7: the main thread is busy for longer than the library waits
-- (request_timeout_ms): the CLI gets timeout errors, and the library never
-- hands the timed-out requests (closeDiff new.txt, openDiff main.c) to Neovim.
-- The view of new.txt stays (the plugin never learns of its closeDiff) but
-- the library has forgotten that diff: deciding it is refused, and the view closes.
local before
step('diff7 shown', function() end, function()
  return diff_buf(NEW) ~= nil
end)

step('diff7 busy', function()
  local s = qc.status()
  before = { late = s.late, events = s.events, pulls = lib_calls.qc_companion_next_event or 0 }
  emit('diff7-busy')
  -- run.sh sends closeDiff(new.txt) and openDiff(main.c) meanwhile, and
  -- creates go-diff7-answered once the CLI got both answers (the timeout
  -- errors); busy until then, at most 3 request timeouts.
  local t0 = uv.hrtime()
  os.execute(string.format("i=0; while [ ! -e '%s' ] && [ $i -lt %d ]; do sleep 0.05; i=$((i+1)); done",
    T .. '/go-diff7-answered', math.ceil(REQUEST_TIMEOUT_MS * 3 / 50)))
  before.busy_ms = (uv.hrtime() - t0) / 1e6
  before.woke = uv.hrtime()
end, function()
  -- the poll callback has pulled since (or 1 s passed: checked below)
  return (lib_calls.qc_companion_next_event or 0) > before.pulls or (uv.hrtime() - before.woke) / 1e6 > 1000
end)

step('diff7 after', function() end) -- one more main-loop turn: scheduled UI work (if any) has run

step('diff7 settled', function()
  local s = qc.status()
  check(string.format('diff 7: the main loop was busy longer than the request timeout (%.0f ms > %d ms)',
    before.busy_ms, REQUEST_TIMEOUT_MS), before.busy_ms > REQUEST_TIMEOUT_MS and exists(T .. '/go-diff7-answered'),
    before)
  check('diff 7: the plugin asked for events after the busy period', (lib_calls.qc_companion_next_event or 0)
    > before.pulls, { before = before.pulls, now = lib_calls.qc_companion_next_event })
  check('diff 7: the timed-out requests were never handed out', s.events == before.events, s)
  check('diff 7: so no late answer', s.late == before.late, s)
  check('diff 7: the timed-out openDiff of main.c was not shown', diff_buf(MAIN) == nil, s)
  check('diff 7: the view of new.txt is still there (its closeDiff never reached Neovim)',
    diff_buf(NEW) ~= nil and #api.nvim_list_tabpages() == 2, s)
  -- the library forgot that diff when its closeDiff timed out
  local ok, err = qc.accept(NEW)
  check('diff 7: accepting the orphaned view is refused (QC_NOT_FOUND) with a clear message',
    not ok and tostring(err):find('QC_NOT_FOUND', 1, true) ~= nil
      and tostring(err):find('no longer waits', 1, true) ~= nil, err)
  check('diff 7: ... and its view is closed', no_diffs() and #api.nvim_list_tabpages() == 1, qc.status())
  check('diff 7: no library call failed', qc.status().last_error == nil, qc.status().last_error)
  emit('diff7')
end, go('diff8'))

-- diff 8: after stale requests, the next closeDiff gets its own answer
step('diff8 shown', function() end, function()
  return diff_buf(MAIN) ~= nil
end)

step('diff8 edit', function()
  api.nvim_buf_set_lines(diff_buf(MAIN), 0, 1, false, { 'eight, edited' })
  emit('diff8-edited')
end, no_diffs)

step('diff8 closed', function()
  emit('diff8')
end, go('close'))

step('close a file', function()
  while #api.nvim_list_tabpages() > 1 do
    vim.cmd('tabclose')
  end
  vim.cmd('edit ' .. vim.fn.fnameescape(OTHER))
  vim.cmd('bwipeout ' .. vim.fn.bufnr(MAIN))
  local paths = context_paths()
  check('library context: main.c gone after :bwipeout', not vim.tbl_contains(paths, MAIN), paths)
  check('library context: other.txt is there', vim.tbl_contains(paths, OTHER), paths)
  check('no library call failed', qc.status().last_error == nil, qc.status().last_error)
  local set_cb = {}
  for name in pairs(lib_calls) do
    if name:find('^qc_.*_set_.*callback$') or name == 'qc_reply_set_text' then
      set_cb[#set_cb + 1] = name
    end
  end
  check('no qc_*_set_*_callback (nor qc_reply_set_text) was ever called', #set_cb == 0, set_cb)
  check('no callback type is declared in this Lua state', not pcall(require('ffi').typeof, 'qc_open_diff_fn')
    and not pcall(require('ffi').typeof, 'qc_log_fn'))
  check('requests were pulled and answered (next_event, respond)',
    (lib_calls.qc_companion_next_event or 0) >= 10 and (lib_calls.qc_companion_respond or 0) >= 10, lib_calls)
  check('each pulled event was counted', qc.status().events >= 10, qc.status())
  emit('closed')
end, go('stop'))

step('stop', function()
  local lock = qc.status().lock_file
  vim.cmd('QwenStop')
  check(':QwenStop stops it', qc.status() == nil)
  check('the lock file is removed', not exists(lock), lock)
  check('QWEN_CODE_IDE_SERVER_PORT is unset', vim.env.QWEN_CODE_IDE_SERVER_PORT == nil)
  check('QWEN_CODE_IDE_WORKSPACE_PATH is unset', vim.env.QWEN_CODE_IDE_WORKSPACE_PATH == nil)
  check('jobs no longer inherit the port', vim.fn.system({ 'sh', '-c', 'printf %s "$QWEN_CODE_IDE_SERVER_PORT"' }) == '')
  -- A second run in the same Neovim (new companion, new event fd, new port).
  vim.cmd('QwenStart')
  local s = qc.status()
  check('restart after stop works', s ~= nil and s.diffs_enabled and exists(s.lock_file), s)
  check('restart: pull mode again, calls counted anew', lib_calls.qc_companion_enable_events == 2, lib_calls)
  emit('restarted', { lock_file = s and s.lock_file, port = s and s.port })
end, go('diff9'))

step('diff9 shown', function() end, function()
  return diff_buf(MAIN) ~= nil
end)

-- diff 9: stop while requests (closeDiff main.c, openDiff new.txt) wait in
-- the queue, unanswered, because the main thread is busy
step('diff9 stop while requests wait', function()
  local lock = qc.status().lock_file
  emit('diff9-busy')
  -- Kept: run.sh sends closeDiff and openDiff meanwhile; nothing tells the
  -- busy main thread that the library queued them.
  os.execute('sleep 1.5')
  local t0 = uv.hrtime()
  vim.cmd('QwenStop')
  local ms = (uv.hrtime() - t0) / 1e6
  check(string.format('stop with requests waiting returns at once (%.0f ms)', ms), ms < 2000, ms)
  check('second stop removes its lock file', not exists(lock), lock)
  check('its diff view is closed', #api.nvim_list_tabpages() == 1, #api.nvim_list_tabpages())
  local locks = vim.fn.glob(T .. '/locks/*', false, true)
  check('no lock file left', #locks == 0, locks)
  emit('stopped')
end, function()
  return vim.fn.filereadable(T .. '/go-end') == 1
end)

step('after stop', function()
  -- the requests that were waiting at stop left nothing behind on screen
  check('after stop: no diff view appeared', #api.nvim_list_tabpages() == 1 and qc.status() == nil,
    #api.nvim_list_tabpages())
  check('after stop: one tab, no qwen-diff:// buffer', #vim.tbl_filter(function(b)
    return api.nvim_buf_get_name(b):find('^qwen%-diff://') ~= nil
  end, api.nvim_list_bufs()) == 0)
  emit('end')
end)

P.run(steps, STEP_TIMEOUT_MS, T .. '/nv-error.json')
