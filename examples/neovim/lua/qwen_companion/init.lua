-- qwen_companion: makes Neovim an IDE companion of Qwen Code and Gemini CLI
-- through the C ABI of libqwen_companion (LuaJIT FFI; no C compiler, no extra library).
--
--   require('qwen_companion').setup({ autostart = true })
--   :QwenStart / :QwenStop / :QwenStatus / :QwenRun / :GeminiRun
--   :QwenDiffAccept / :QwenDiffReject (or :w in a proposed-diff buffer)
--
-- One companion serves the current working directory. Editor events feed the
-- context (focused / opened / closed files, cursor, visual selection; only
-- buffers backed by a regular file on disk); the terminal variables of the
-- CLIs served (setup{ cli }: $QWEN_CODE_IDE_SERVER_PORT and
-- $QWEN_CODE_IDE_WORKSPACE_PATH for Qwen Code, $GEMINI_CLI_IDE_SERVER_PORT,
-- $GEMINI_CLI_IDE_WORKSPACE_PATH and $GEMINI_CLI_IDE_PID for Gemini CLI) are
-- set in Neovim's environment so :terminal (and every job) inherits them. Qwen Code's openDiff opens a tab
-- with the file and the proposal side by side (diff mode). Next to the
-- companion runs the plugin host (qwen_companion.plugins) with its MCP server.
--
-- For other modules: M.plugin_host(), M.on_start(fn) / M.on_stop(fn),
-- M.terminal_env() / M.add_terminal_env(fn), M.statusline().
--
-- Threading: every call into the library is made from Neovim's main thread,
-- and no Lua function is ever registered as a C callback. Diff requests are
-- pulled (the library's pull mode): a vim.uv poll handle watches the event fd,
-- its callback drains qc_companion_next_event on the main loop, and requests
-- are answered with qc_companion_respond. Log lines the library queues as
-- pulled `log` events, and the plugin's own messages, go to the log file
-- (qwen_companion.log, :QwenLog).

local ffi = require('ffi')
local capi = require('qwen_companion.capi')

local api = vim.api
local uv = vim.uv or vim.loop

local M = {}

local config = require('qwen_companion.config')
local plugins = require('qwen_companion.plugins')

--- The options in use (config.defaults() merged with setup's options); the
--- `vim.g.qwen_companion_<key>` variables are read for the keys left nil.
M.config = config.defaults()

local ENV_KEYS = { 'QWEN_CODE_IDE_SERVER_PORT', 'QWEN_CODE_IDE_WORKSPACE_PATH', 'GEMINI_CLI_IDE_SERVER_PORT',
  'GEMINI_CLI_IDE_WORKSPACE_PATH', 'GEMINI_CLI_IDE_PID' }
local DIFF_SCHEME = 'qwen-diff://'

local S = nil -- the running companion's state
local group = nil

local log = require('qwen_companion.log')
local view = require('qwen_companion.diff_view')
local diff_text, close_view, fill, orphan_message, label_view =
  view.diff_text, view.close_view, view.fill, view.orphan_message, view.label_view

-- A message for the user, also written to the log file.
local function notify(msg, level)
  log.write(log.vim_level(level), 'neovim', msg)
  vim.notify('qwen-companion: ' .. msg, level or vim.log.levels.INFO)
end

local function setting(key)
  local v = M.config[key]
  if v == nil then
    v = vim.g['qwen_companion_' .. key]
  end
  return v
end

--- The CLIs to serve: setup's `cli`, else vim.g.qwen_companion_cli, else
--- 'qwen' (checked when the companion starts).
function M.cli()
  local v = setting('cli')
  if v == nil then
    return 'qwen'
  end
  return v
end

-- A library call whose failure is only worth a debug note (editor events).
local function quiet(name, ...)
  if not S then
    return
  end
  local ok, err = capi.call(S.lib, name, S.c, ...)
  if not ok then
    S.last_error = err
  end
  return ok, err
end

---------------------------------------------------------------------------
-- Editor context
---------------------------------------------------------------------------

--- The absolute path of a buffer backed by a regular file on disk, else nil.
local function file_of(buf)
  local name = buf and require('qwen_companion.editor_tools').path_of(buf)
  if not name then
    return nil
  end
  local st = uv.fs_stat(name)
  if not st or st.type ~= 'file' then
    return nil
  end
  return name
end

local function still_tracked(path)
  for _, p in pairs(S.tracked) do
    if p == path then
      return true
    end
  end
  return false
end

--- Reports `buf` as opened (or renamed); returns its path or nil.
local function sync_buffer(buf)
  local path = file_of(buf)
  local old = S.tracked[buf]
  if path == nil then
    return nil
  end
  if old == nil then
    S.tracked[buf] = path
    quiet('qc_companion_file_opened', path)
  elseif old ~= path then
    S.tracked[buf] = path
    if still_tracked(old) then
      quiet('qc_companion_file_opened', path)
    else
      quiet('qc_companion_file_renamed', old, path)
    end
    if S.active == old then
      S.active = path
    end
  end
  return path
end

local function buffer_closed(buf)
  local path = S.tracked[buf]
  if path == nil then
    return
  end
  S.tracked[buf] = nil
  if still_tracked(path) then
    return
  end
  if S.active == path then
    S.active = nil
  end
  quiet('qc_companion_file_closed', path)
end

--- `path` gets the focus; a selection reported for the previous file is cleared.
local function make_active(path)
  if S.selection and S.active and S.active ~= path then
    quiet('qc_companion_set_selection', S.active, nil, 0)
    S.selection = false
  end
  S.active = path
  quiet('qc_companion_file_focused', path)
end

--- Cursor (and selection) of the current window, if it shows the active file.
local function report_cursor()
  if not S then
    return
  end
  local buf = api.nvim_get_current_buf()
  local path = S.tracked[buf] or sync_buffer(buf)
  if path == nil then
    return
  end
  if S.active ~= path then
    make_active(path)
  end
  local pos = api.nvim_win_get_cursor(0)
  local line_text = api.nvim_buf_get_lines(buf, pos[1] - 1, pos[1], false)[1] or ''
  -- character: 1-based, in UTF-16 code units like VS Code's Position.character
  local _, utf16 = vim.str_utfindex(line_text, math.min(pos[2], #line_text))
  quiet('qc_companion_set_cursor', path, pos[1], utf16 + 1)
  local text = require('qwen_companion.selection').visual_text(buf)
  if text ~= nil and text ~= '' then
    quiet('qc_companion_set_selection', path, text, #text)
    S.selection = true
  elseif S.selection then
    quiet('qc_companion_set_selection', path, nil, 0)
    S.selection = false
  end
end

local function focus(buf)
  if not S or buf ~= api.nvim_get_current_buf() then
    return
  end
  local path = sync_buffer(buf)
  if path == nil then
    return
  end
  make_active(path)
  report_cursor()
end

local function set_env(env)
  for _, k in ipairs(ENV_KEYS) do
    vim.env[k] = nil
  end
  for k, v in pairs(env or {}) do
    vim.env[k] = v
  end
end

local function refresh_env()
  local json = capi.get_string(S.lib, 'qc_companion_terminal_env_json', S.c)
  if json then
    S.env = vim.fn.json_decode(json)
    set_env(S.env)
  end
end

local function workspace_root()
  local root = vim.fn.fnamemodify(vim.fn.getcwd(-1, -1), ':p'):gsub('(.)/$', '%1')
  return root
end

---------------------------------------------------------------------------
-- Diffs (main thread; requests are pulled from the library's event queue)
---------------------------------------------------------------------------

local function diff_of_buf(buf)
  for _, d in pairs(S and S.diffs or {}) do
    if d.buf == buf then
      return d
    end
  end
end

local function forget(d)
  if S and S.diffs[d.path] == d then
    S.diffs[d.path] = nil
  end
  d.done = true
end

-- Accepts or rejects diff `d` and closes its view. Returns true, or nil and
-- a message (not shown: the caller reports it).
local function decide(d, accept)
  forget(d)
  local ok, err, status
  if accept then
    local text = diff_text(d)
    ok, err, status = capi.call(S.lib, 'qc_companion_diff_accept', S.c, d.path, text, #text)
  else
    ok, err, status = capi.call(S.lib, 'qc_companion_diff_reject', S.c, d.path)
  end
  close_view(d)
  if ok then
    notify((accept and 'accepted ' or 'rejected ') .. vim.fn.fnamemodify(d.path, ':~:.'))
    return true
  end
  if status == capi.status.QC_NOT_FOUND then
    err = orphan_message(d, err)
  end
  return nil, err
end

local function show_diff(path, content, meta)
  local d = S.diffs[path]
  local label = view.label(meta)
  if d and d.buf and api.nvim_buf_is_valid(d.buf) then
    fill(d, content) -- a new proposal for a diff still on screen
    d.label = label
    label_view(d)
    if d.tab and api.nvim_tabpage_is_valid(d.tab) then
      api.nvim_set_current_tabpage(d.tab)
    end
    return
  end
  d = { path = path, proposed = content, label = label, cli = S.cli }
  S.diffs[path] = d
  local ok, err = pcall(function()
    vim.cmd('tabnew')
    d.tab = api.nvim_get_current_tabpage()
    local ft
    if uv.fs_stat(path) then
      vim.cmd('edit ' .. vim.fn.fnameescape(path))
      ft = vim.bo.filetype
    else -- a new file: compare with an empty scratch buffer
      d.original_scratch = api.nvim_get_current_buf()
      vim.bo.buftype, vim.bo.bufhidden, vim.bo.swapfile = 'nofile', 'wipe', false
      api.nvim_buf_set_name(0, DIFF_SCHEME .. 'new/' .. path)
    end
    vim.cmd('diffthis')
    vim.cmd('rightbelow vnew')
    d.buf = api.nvim_get_current_buf()
    local bo = vim.bo[d.buf]
    bo.buftype, bo.bufhidden, bo.swapfile = 'acwrite', 'wipe', false
    api.nvim_buf_set_name(d.buf, DIFF_SCHEME .. path)
    fill(d, content)
    if ft and ft ~= '' then
      bo.filetype = ft
    end
    vim.cmd('diffthis')
    label_view(d)
    api.nvim_create_autocmd('BufWriteCmd', {
      group = group,
      buffer = d.buf,
      callback = function()
        if not d.done then
          local dok, derr = decide(d, true)
          if not dok then
            notify(derr, vim.log.levels.WARN)
          end
        end
      end,
    })
    api.nvim_create_autocmd('BufWipeout', {
      group = group,
      buffer = d.buf,
      callback = function()
        if d.done or not S then
          return
        end
        forget(d) -- closed without a decision: ide/diffClosed
        d.buf = nil
        local ok2, err2, st2 = capi.call(S.lib, 'qc_companion_diff_closed', S.c, d.path)
        if not ok2 then
          notify(st2 == capi.status.QC_NOT_FOUND and orphan_message(d, err2) or err2, vim.log.levels.WARN)
        end
        vim.schedule(function()
          close_view(d)
        end)
      end,
    })
  end)
  if not ok then
    forget(d)
    close_view(d)
    capi.call(S.lib, 'qc_companion_diff_closed', S.c, path)
    notify('cannot show the diff of ' .. path .. ': ' .. tostring(err), vim.log.levels.ERROR)
    return
  end
  notify(
    string.format(
      '%s%s proposes changes to %s: :QwenDiffAccept (or :w) / :QwenDiffReject',
      view.proposer(S.cli),
      label and (' (' .. label .. ')') or '',
      vim.fn.fnamemodify(path, ':~:.')
    )
  )
end

-- A request the CLI gave up on after Neovim pulled it (its timeout,
-- request_timeout_ms, ran out before the answer, or the companion is
-- stopping): qc_companion_respond says QC_NOT_FOUND. Counted, and reported
-- (scheduled: this may run in the poll callback, where vim.notify is not
-- allowed). Requests that time out before they are pulled are never handed out.
local function late(st, what, err)
  st.late = st.late + 1
  vim.schedule(function()
    notify(what .. ' came after Qwen Code stopped waiting: ' .. tostring(err), vim.log.levels.WARN)
  end)
end

-- Answers pulled request `id` of companion `st`. Returns true, or false
-- after reporting an answer that came too late.
local function respond(st, what, id, ok, text)
  local rok, err, status = capi.call(st.lib, 'qc_companion_respond', st.c, id, ok, text, text and #text or 0)
  if rok then
    return true
  end
  if status == capi.status.QC_NOT_FOUND then
    late(st, what, err)
  else
    st.last_error = err
  end
  return false
end

-- closeDiff from the CLI (scheduled on the main loop): answer with the
-- buffer's current text, close the view.
local function close_diff(st, id, path)
  if S ~= st then
    return -- stopped meanwhile: the library has already answered the CLI
  end
  local d = st.diffs[path]
  if d == nil then
    respond(st, 'closeDiff of ' .. path, id, 1, nil) -- {"content": null}
    return
  end
  local text = diff_text(d)
  forget(d)
  -- Even a late answer closes the view: the CLI asked for it, and the
  -- library has forgotten this diff.
  respond(st, 'closeDiff of ' .. path, id, 1, text)
  close_view(d)
end

-- openDiff from the CLI: schedule the diff view, then answer "shown" at once.
-- A request the CLI already gave up on is not shown (the library forgot it:
-- accepting it would fail).
local function open_diff(st, id, path, content, meta)
  local job = { cancelled = false }
  vim.schedule(function()
    if S == st and not job.cancelled then
      show_diff(path, content, meta)
    end
  end)
  if not respond(st, 'openDiff of ' .. path, id, 1, nil) then
    job.cancelled = true
  end
end

-- One pulled event. Runs in the poll callback (main thread, fast context):
-- only library calls and vim.schedule here, the UI work is scheduled.
local function handle_event(st, ev)
  if type(ev) ~= 'table' then
    return
  end
  if ev.type == 'log' then
    vim.schedule(function()
      log.event('companion', ev)
    end)
    return
  end
  local id, path = ev.id, ev.filePath
  if type(id) ~= 'number' then
    return -- not a request: nothing to answer
  end
  if ev.type == 'openDiff' and type(path) == 'string' and type(ev.newContent) == 'string' then
    open_diff(st, id, path, ev.newContent, { session = ev.session, clients = ev.clients })
  elseif ev.type == 'closeDiff' and type(path) == 'string' then
    vim.schedule(function()
      close_diff(st, id, path)
    end)
  else -- a request this plugin does not know (or a malformed one)
    respond(st, tostring(ev.type), id, 0, 'Neovim does not handle ' .. tostring(ev.type))
  end
end

local function unwatch_events(st)
  if st.poll then
    st.poll:stop() -- before qc_companion_free closes the fd
    if not st.poll:is_closing() then
      st.poll:close()
    end
    st.poll = nil
  end
end

-- The event fd is readable: take every waiting event (the fd stays readable
-- until the queue is empty, so all of them are taken now).
local function drain(st)
  while S == st do
    local json, err = capi.get_string(st.lib, 'qc_companion_next_event', st.c)
    if json == nil then
      if err then
        -- The fd stays readable while events wait: stop watching rather
        -- than spin; requests then time out in the library (request_timeout_ms).
        st.last_error = err
        unwatch_events(st)
        vim.schedule(function()
          notify('cannot take diff requests any more: ' .. err, vim.log.levels.ERROR)
        end)
      end
      return
    end
    local ok, ev = pcall(vim.json.decode, json)
    if ok then
      if type(ev) == 'table' and ev.type == 'log' then
        st.logs = (st.logs or 0) + 1 -- log lines are not counted as events
      else
        st.events = st.events + 1
      end
      handle_event(st, ev)
    else
      st.last_error = 'bad event: ' .. tostring(ev)
    end
  end
end

-- Switches `st`'s companion to pull mode and watches its event fd with the
-- main loop. Returns true, or nil and a message.
local function watch_events(st)
  local fd = ffi.new('int32_t[1]')
  local ok, err = capi.call(st.lib, 'qc_companion_enable_events', st.c, fd)
  if not ok then
    return nil, err
  end
  -- The library's log lines arrive as `log` events (written to the log file).
  local lok, lerr = capi.optional_call(st.lib, 'qc_companion_enable_log_events', st.c, capi.log.INFO)
  if not lok then
    st.last_error = lerr
  end
  st.event_fd = tonumber(fd[0])
  local watch, werr = require('qwen_companion.platform').watch_events(st.event_fd, function(e)
    if e then
      st.last_error = 'event fd: ' .. tostring(e)
    end
    local dok, derr = pcall(drain, st)
    if not dok then
      st.last_error = derr
    end
  end)
  if not watch then
    return nil, werr
  end
  st.poll = watch -- a poll on the descriptor, or a timer on Windows
  return true
end

---------------------------------------------------------------------------
-- Lifecycle
---------------------------------------------------------------------------

local function autocmds()
  group = api.nvim_create_augroup('QwenCompanion', { clear = true })
  local function on(events, fn)
    api.nvim_create_autocmd(events, {
      group = group,
      callback = function(args)
        if S then
          local ok, err = pcall(fn, args)
          if not ok then
            S.last_error = err
          end
        end
      end,
    })
  end
  on({ 'BufEnter', 'WinEnter' }, function(a)
    focus(a.buf)
  end)
  on({ 'BufReadPost', 'BufFilePost' }, function(a)
    sync_buffer(a.buf)
  end)
  on({ 'BufWritePost' }, function(a) -- a new file becomes real when first written
    if sync_buffer(a.buf) and a.buf == api.nvim_get_current_buf() then
      focus(a.buf)
    end
  end)
  on({ 'BufDelete', 'BufWipeout' }, function(a)
    buffer_closed(a.buf)
  end)
  on({ 'CursorMoved', 'CursorMovedI', 'ModeChanged' }, function()
    report_cursor()
  end)
  on({ 'DirChanged' }, function()
    if vim.v.event.scope == 'global' then
      local root = workspace_root()
      if root ~= S.root then
        S.root = root
        quiet('qc_companion_set_workspace_roots_json', vim.fn.json_encode({ root }))
        refresh_env()
      end
    end
  end)
  on({ 'VimLeavePre' }, function()
    M.stop({ silent = true })
  end)
end

-- Connected CLIs of `st` (qc_companion_connected_clients), or nil.
local function clients_of(st)
  local n = ffi.new('uint32_t[1]')
  local ok = pcall(capi.call, st.lib, 'qc_companion_connected_clients', st.c, n)
  return ok and tonumber(n[0]) or nil
end

local function last_error_of(st)
  local host = st.host
  return st.last_error or st.plugin_error or (host and (host.last_error or host.mcp_error or host.register_error))
end

-- Hooks of other modules (M.on_start / M.on_stop / M.add_terminal_env).
local hooks = require('qwen_companion.hooks')

local function run_hooks(kind, st)
  local _, errors = hooks.run(kind, function()
    return M.status_of(st)
  end)
  for _, err in ipairs(errors) do
    st.last_error = 'on_' .. kind .. ' hook: ' .. tostring(err)
    vim.schedule(function()
      notify('an on_' .. kind .. ' hook failed: ' .. tostring(err), vim.log.levels.ERROR)
    end)
  end
end

--- Registers `fn(status)`, called after every start (companion and plugin
--- host running); when the companion already runs, `fn` is called at once.
--- Returns a function that removes the hook.
function M.on_start(fn)
  local remove = hooks.add('start', fn, 'on_start')
  if S then
    local ok, err = pcall(fn, M.status())
    if not ok then
      S.last_error = 'on_start hook: ' .. tostring(err)
      notify('an on_start hook failed: ' .. tostring(err), vim.log.levels.ERROR)
    end
  end
  return remove
end

--- Registers `fn(status)`, called when the companion stops, before the
--- plugin host and the companion are released. Returns a remover.
function M.on_stop(fn)
  return hooks.add('stop', fn, 'on_stop')
end

--- The running plugin host (see qwen_companion.plugins), or nil when the
--- companion is stopped, `plugins.enabled` is false or the host failed to
--- start (status().plugins.error says why).
function M.plugin_host()
  return S and S.host or nil
end

--- Registers `fn()` returning a table of variables for the terminals the
--- plugin starts (:QwenRun, :GeminiRun); called each time. Returns a remover.
function M.add_terminal_env(fn)
  return hooks.add('env', fn, 'add_terminal_env')
end

--- The variables a terminal started now needs: the companion's, for every
--- CLI it serves (QWEN_CODE_IDE_SERVER_PORT, QWEN_CODE_IDE_WORKSPACE_PATH;
--- GEMINI_CLI_IDE_SERVER_PORT, GEMINI_CLI_IDE_WORKSPACE_PATH,
--- GEMINI_CLI_IDE_PID), the plugin MCP
--- server's `env` (empty with the library's bridge), then those of
--- add_terminal_env providers. Empty when stopped.
function M.terminal_env()
  local env = {}
  if not S then
    return env
  end
  for k, v in pairs(S.env or {}) do
    env[k] = v
  end
  if S.host then
    for k, v in pairs(S.host:terminal_env()) do
      env[k] = v
    end
  end
  local extras, errors = hooks.run('env')
  for _, extra in ipairs(extras) do
    if type(extra) == 'table' then
      for k, v in pairs(extra) do
        env[k] = tostring(v)
      end
    end
  end
  if #errors > 0 then
    S.last_error = 'terminal env provider: ' .. tostring(errors[#errors])
  end
  return env
end

local function start_plugin_host(st, libpath)
  local p = M.config.plugins or {}
  if p.enabled == false then
    return
  end
  local reg = setting('register_mcp')
  local host, err = plugins.start({
    lib = st.lib,
    libpath = libpath,
    dir = p.dir,
    node = p.node,
    root = st.root,
    mcp = p.mcp ~= false,
    editor_tools = setting('editor_tools') ~= false,
    register = reg ~= false and p.mcp ~= false and not st.registration,
    always_load_tools = p.always_load_tools,
  })
  if not host then
    st.plugin_error = err
    notify('the plugin host did not start: ' .. tostring(err), vim.log.levels.WARN)
    return
  end
  st.host = host
  if host.mcp_error then
    notify('the plugins MCP server did not start: ' .. tostring(host.mcp_error), vim.log.levels.WARN)
  end
  if host.register_error then
    notify('the plugins MCP server is not registered with Qwen Code: ' .. tostring(host.register_error),
      vim.log.levels.WARN)
  end
end

-- The registration's answer: registered once per Neovim session (and the
-- library leaves the file as it is when the entry is already the same).
local registration = nil

--- Starts the companion for the current working directory, and next to it
--- the plugin host with its MCP server. Returns true, or nil and a message.
function M.start()
  if S then
    return nil, 'already running on port ' .. tostring(S.port)
  end
  local libpath = capi.library_path(M.config.lib)
  local lib, err = capi.load(libpath)
  if not lib then
    return nil, err
  end
  local cli, cli_err = config.check_cli(M.cli(), M.config.cli == nil and 'vim.g.qwen_companion_cli' or 'cli')
  if not cli then
    return nil, cli_err
  end
  local root = workspace_root()
  local cfg = {
    -- 'qwen' is the library's default: left out (with geminiDir, unused
    -- then), a library older than the `cli` key still starts
    cli = cli ~= 'qwen' and cli or nil,
    geminiDir = cli ~= 'qwen' and setting('gemini_dir') and vim.fn.expand(setting('gemini_dir')) or nil,
    workspaceRoots = { root },
    ideName = setting('ide_name'),
    ideId = setting('ide_id'),
    lockDir = setting('lock_dir') and vim.fn.expand(setting('lock_dir')) or nil,
    debounceMs = setting('debounce_ms'),
    maxWaitMs = setting('max_wait_ms'),
    trusted = setting('trusted'),
    requestTimeoutMs = setting('request_timeout_ms'),
  }
  local out = ffi.new('qc_companion *[1]')
  local ok, nerr = capi.call(lib, 'qc_companion_new', vim.fn.json_encode(cfg), out)
  if not ok then
    return nil, nerr
  end
  local c = out[0]
  S = { lib = lib, libpath = libpath, c = c, root = root, tracked = {}, diffs = {}, env = {}, events = 0, late = 0,
    registration = registration, cli = cli }

  if M.config.diffs then
    -- Before start: no request can reach the library before it queues them.
    local wok, werr = watch_events(S)
    if not wok then
      unwatch_events(S)
      lib.qc_companion_free(c)
      S = nil
      return nil, werr .. ' (setup{ diffs = false } runs without diffs)'
    end
  end

  ok, err = capi.call(lib, 'qc_companion_start', c)
  if not ok then
    M.stop({ silent = true })
    return nil, err
  end
  local port = ffi.new('uint16_t[1]')
  capi.call(lib, 'qc_companion_port', c, port)
  S.port = tonumber(port[0])
  S.lock_file = capi.get_string(lib, 'qc_companion_lock_file_path', c)
  -- an older library: only Qwen Code's lock file
  S.discovery_files = capi.discovery_files(lib, c) or { qwen = S.lock_file }
  refresh_env()
  autocmds()
  -- What is already open.
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buflisted then
      sync_buffer(buf)
    end
  end
  focus(api.nvim_get_current_buf())
  start_plugin_host(S, libpath)
  if S.host and S.host.registration then
    registration = S.host.registration
  end
  run_hooks('start', S)
  return true
end

--- Stops the companion: removes the lock file, closes diff views, unsets
--- the terminal variables, stops the plugin host. opts.silent: no message.
function M.stop(opts)
  if not S then
    return nil, 'not running'
  end
  local st = S
  run_hooks('stop', st)
  S = nil
  if group then
    api.nvim_clear_autocmds({ group = group })
  end
  unwatch_events(st)
  plugins.stop(st.host)
  -- Stops, removes the lock file; requests still waiting for an answer end
  -- with an error for the CLI. Scheduled diff work of `st` finds S ~= st and
  -- does nothing.
  st.lib.qc_companion_free(st.c)
  for _, d in pairs(st.diffs) do
    d.done = true
    pcall(close_view, d)
  end
  set_env(nil)
  if not (opts and opts.silent) then
    notify('stopped')
  end
  return true
end

--- The state of companion state `st` (see M.status).
function M.status_of(st)
  local diffs = {}
  for path, d in pairs(st.diffs) do
    diffs[#diffs + 1] = { path = path, buf = d.buf, label = d.label }
  end
  local host = st.host
  return {
    port = st.port,
    cli = st.cli, -- the CLIs served: 'qwen', 'gemini' or 'both'
    lock_file = st.lock_file,
    discovery_files = vim.deepcopy(st.discovery_files), -- { qwen = path, gemini = path } of the CLIs served
    lib = st.libpath,
    root = st.root,
    env = vim.deepcopy(st.env),
    active = st.active,
    diffs = diffs,
    diffs_enabled = st.poll ~= nil,
    event_fd = st.event_fd,
    events = st.events, -- events pulled so far
    late = st.late, -- answers that came after the CLI stopped waiting
    last_error = st.last_error,
    clients = clients_of(st), -- connected CLIs (Qwen Code, Gemini CLI)
    plugins = {
      running = host ~= nil,
      error = st.plugin_error or (host and host.last_error) or nil,
      dir = host and host.dir or nil,
      events = host and host.events or 0,
      mcp = host and host.mcp and vim.deepcopy(host.mcp) or nil,
      mcp_error = host and host.mcp_error or nil,
      registration = host and vim.deepcopy(host.registration or st.registration) or nil,
      register_error = host and host.register_error or nil,
      editor_tools = host and host.editor_tools or false,
      editor_tools_error = host and host.editor_tools_error or nil,
    },
  }
end

--- State of the running companion (nil when stopped).
function M.status()
  if not S then
    return nil
  end
  return M.status_of(S)
end

--- A short status for the statusline (lualine, 'statusline'): '' when
--- stopped, else e.g. `Qwen: 2 CLIs`, `Qwen: 1 CLI, 1 diff`,
--- `Qwen: no CLI, error: <first 40 characters>`. `M.statusline_data()`
--- gives the same facts as a table.
function M.statusline()
  return require('qwen_companion.statusline').format(M.statusline_data())
end

--- `{ running, clients, diffs, error }`: whether the companion runs, how
--- many CLIs are connected, how many diffs wait for a decision, the last
--- error (nil when none).
function M.statusline_data()
  if not S then
    return { running = false, diffs = 0 }
  end
  return { running = true, clients = clients_of(S), diffs = vim.tbl_count(S.diffs), error = last_error_of(S) }
end

--- The IdeContext as clients get it (decoded JSON), or nil.
function M.context()
  if not S then
    return nil
  end
  local json = capi.get_string(S.lib, 'qc_companion_context_json', S.c)
  return json and vim.fn.json_decode(json)
end

local function find_diff(path)
  if not S then
    return nil, 'not running'
  end
  if path and path ~= '' then
    local d = S.diffs[vim.fn.fnamemodify(path, ':p')]
    return d, d == nil and ('no diff open for ' .. path) or nil
  end
  local d = diff_of_buf(api.nvim_get_current_buf())
  if d == nil then
    local cur = file_of(api.nvim_get_current_buf())
    d = cur and S.diffs[cur]
  end
  return d, d == nil and 'no diff here (pass a path)' or nil
end

--- Accepts a diff (the current buffer's, or `path`'s) with the proposed
--- buffer's text, edits included.
function M.accept(path)
  local d, err = find_diff(path)
  if not d then
    return nil, err
  end
  return decide(d, true)
end

--- Rejects every open diff (the CLIs get ide/diffRejected; nothing is
--- written) and closes their views. Returns the number rejected, or nil
--- and a message (not running; the first failure, after trying all).
function M.close_all_diffs()
  if not S then
    return nil, 'not running'
  end
  local list = {}
  for _, d in pairs(S.diffs) do
    list[#list + 1] = d
  end
  table.sort(list, function(a, b)
    return a.path < b.path
  end)
  local n, first_err = 0, nil
  for _, d in ipairs(list) do
    local ok, err = decide(d, false)
    if ok then
      n = n + 1
    else
      first_err = first_err or err
    end
  end
  if first_err then
    return nil, first_err
  end
  return n
end

--- The handles `health_json` reports on: the companion, the plugin host,
--- the participant (each nil when not running).
function M.handles()
  if not S then
    return {}
  end
  return { lib = S.lib, c = S.c, h = S.host and S.host.h or nil }
end

--- Rejects a diff (the current buffer's, or `path`'s).
function M.reject(path)
  local d, err = find_diff(path)
  if not d then
    return nil, err
  end
  return decide(d, false)
end

--- The proposing CLI's label for a diff (see qwen_companion.diff_view.label).
M.diff_label = view.label
--- The status line of a proposal window (qwen_companion.diff_view.statusline).
M.diff_statusline = view.statusline

--- Sets options (see qwen_companion.config and :help qwen_companion-setup).
--- A wrong type or an unknown key raises an error naming it, and changes
--- nothing. Also does what plugin/qwen_companion.lua does (every :Qwen*
--- command, autostart: on VimEnter, or now when Neovim has entered
--- already), for managers that do not source plugin/ (lazy.nvim). A
--- running companion is restarted when `cli` changes (its port changes:
--- the CLIs already running reconnect only when restarted).
function M.setup(opts)
  config.validate(opts)
  M.config = config.merge(M.config, opts)
  if S and M.cli() ~= S.cli then
    M.stop({ silent = true })
    local ok, err = M.start()
    notify(ok and string.format("restarted to serve cli = '%s' (restart the CLIs already running)", S.cli)
      or ('restart for cli = ' .. tostring(M.cli()) .. ' failed: ' .. tostring(err)),
      ok and vim.log.levels.INFO or vim.log.levels.ERROR)
  end
  require('qwen_companion.boot').load()
end

return M
