-- Headless Neovim side of the core part of tests/neovim/run.sh: the
-- command prefix, setup's validation, :checkhealth qwen_companion, the
-- plugin host with its MCP server and registration (against the real
-- library, isolated HOME / QWEN_HOME), the on_start / on_stop hooks,
-- :QwenRun's terminal env, the status line.
--
-- Phases as in test_plugin.lua: $QCNV_TMP/core-<phase>.json holds the
-- checks; run.sh checks the outside and creates $QCNV_TMP/go-core-<next>.

local uv = vim.uv or vim.loop
local api = vim.api

local T = assert(os.getenv('QCNV_TMP'), 'QCNV_TMP')
local WS = assert(os.getenv('QCNV_WS'), 'QCNV_WS')
local QH = assert(os.getenv('QWEN_HOME'), 'QWEN_HOME')
local STEP_TIMEOUT_MS = tonumber(os.getenv('QCNV_TIMEOUT') or '30') * 1000
local PLUGINS = T .. '/plugins'
local SETTINGS = QH .. '/settings.json'

local P = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/phases.lua')(T, 'nv-core-', 'go-core-')
local check, emit, exists, go, read, write = P.check, P.emit, P.exists, P.go, P.read, P.write

local function has(text, needle)
  return type(text) == 'string' and text:find(needle, 1, true) ~= nil
end

-- Runs :checkhealth qwen_companion and returns its report as text. `qwen`
-- and `node` are fakes printing the tested versions (the machine's may be
-- missing or older; tests/neovim/test_health.lua covers the other cases).
local FAKEBIN = T .. '/core-fakebin'
vim.fn.mkdir(FAKEBIN, 'p')
for name, v in pairs({ qwen = '0.24.4', node = 'v22.12.0' }) do
  vim.fn.writefile({ '#!/bin/sh', 'echo ' .. v }, FAKEBIN .. '/' .. name)
  vim.loop.fs_chmod(FAKEBIN .. '/' .. name, tonumber('755', 8))
end
-- The library's own report is the fixture tests/neovim/fixtures/health.json
-- with every check ok (the library resolves `node` once per process: asking
-- it under the fake PATH would make the plugin host run the fake `node`);
-- tests/neovim/test_prompt.lua runs the real qc_health_json.
local HEALTH_FIXTURE = vim.fn.json_decode(table.concat(vim.fn.readfile(vim.fn.fnamemodify(
  debug.getinfo(1, 'S').source:sub(2), ':h') .. '/fixtures/health.json'), '\n'))
for _, c in ipairs(HEALTH_FIXTURE.checks) do
  c.status, c.detail = 'ok', nil
end
local function health()
  local path = vim.env.PATH
  local hr = require('qwen_companion.health_report')
  local real = hr.library_report
  hr.library_report = function()
    return vim.deepcopy(HEALTH_FIXTURE)
  end
  vim.env.PATH = FAKEBIN .. ':' .. path
  vim.cmd('checkhealth qwen_companion')
  vim.env.PATH = path
  hr.library_report = real
  local text = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  vim.cmd('bwipeout!')
  return text
end

-- A refused setup(): the error message, and whether the options stayed as they were.
local function refused(opts)
  local qc = require('qwen_companion')
  local before = vim.deepcopy(qc.config)
  local ok, err = pcall(qc.setup, opts)
  return not ok and tostring(err) or nil, vim.deep_equal(before, qc.config)
end

local notes = {} -- vim.notify messages
local real_notify = vim.notify
vim.notify = function(msg, level, opts)
  notes[#notes + 1] = { msg = msg, level = level, opts = opts }
  return real_notify(msg, level, opts)
end

local qc, capi
local lib_calls = {}
local hooks = { start = {}, stop = {} }
local steps = {}
local function step(name, run, wait)
  steps[#steps + 1] = { name = name, run = run, wait = wait }
end

step('load', function()
  vim.cmd('runtime plugin/qwen_companion.lua')
  for _, c in ipairs({ 'QwenStart', 'QwenStop', 'QwenStatus', 'QwenRun', 'QwenDiffAccept', 'QwenDiffReject' }) do
    check('plugin defines :' .. c, vim.fn.exists(':' .. c) == 2)
  end
  local old = vim.tbl_filter(function(name)
    return not (name:find('^Qwen') or name == 'GeminiRun' or name == 'GeminiToggle')
      or name:find('^QwenCompanion') ~= nil
  end, vim.tbl_keys(api.nvim_get_commands({})))
  check('one prefix: no :QwenCompanion* (nor other) commands but :GeminiRun and :GeminiToggle', #old == 0, old)
  qc = require('qwen_companion')
  capi = require('qwen_companion.capi')
  -- every library function looked up through the namespace (capi.call does lib[name])
  P.count_lib_calls(capi, lib_calls)

  -- setup's validation: a clear error naming the option, nothing changed
  qc.setup({ lock_dir = T .. '/core-locks' })
  local cases = {
    { { plugins = { dir = 5 } }, 'plugins.dir: expected nil or string, got 5' },
    { { autostart = 'yes' }, 'autostart: expected nil or boolean, got yes' },
    { { request_timeout_ms = -1 }, 'request_timeout_ms: expected nil or a whole number of ms, got -1' },
    { { terminal = { cmd = {} } }, 'terminal.cmd: expected nil, a non-empty string or a list of strings' },
    { { terminal = { cmd = { 'qwen', 3 } } }, 'terminal.cmd: expected nil, a non-empty string or a list of strings' },
    { { register_mcp = 1 }, 'register_mcp: expected nil or boolean, got 1' },
    { { autostrat = true }, 'unknown option autostrat' },
    { { plugins = { enable = true } }, 'unknown option plugins.enable' },
    { 5, 'expected a table of options, got number' },
  }
  for _, c in ipairs(cases) do
    local err, same = refused(c[1])
    check('setup(' .. vim.inspect(c[1]):gsub('%s+', ' ') .. ') is refused: ' .. c[2], has(err, c[2]), err)
    check('... and changes nothing', same)
  end
  check('a valid setup() still works', pcall(qc.setup, { plugins = { dir = PLUGINS }, terminal = { split = 'belowright split' } }))
  check('... nested options are merged key by key', qc.config.plugins.dir == PLUGINS and qc.config.plugins.enabled == true
    and qc.config.terminal.cmd == 'qwen' and qc.config.terminal.split == 'belowright split', qc.config)

  -- the library next to the plugin (the lazy.nvim layout: examples/neovim of the crate)
  local path, origin = capi.library_path()
  if os.getenv('QWEN_COMPANION_LIB') then -- run.sh tests another build (QC_NEOVIM_LIB)
    check('$QWEN_COMPANION_LIB names the library', origin == '$QWEN_COMPANION_LIB', { path, origin })
  else
    check('without lib / $QWEN_COMPANION_LIB the library is found next to the plugin (the crate\'s target/release)',
      origin == 'next to the plugin' and vim.fn.resolve(path) == vim.fn.resolve(vim.fn.fnamemodify(capi.plugin_root()
        .. '/../../target/release/' .. capi.library_file_name(), ':p')), { path, origin })
  end

  -- :checkhealth with IDE mode on, in a settings file with comments
  write(SETTINGS, '// my settings\n{\n  /* IDE */ "ide": { "enabled": true },\n  "theme": "a // not a comment"\n}\n')
  local h = health()
  check('checkhealth: LuaJIT and ffi', has(h, 'LuaJIT') and has(h, 'with the ffi module'), h)
  check('checkhealth: the library path and how it was found', has(h, 'path: ' .. path .. ' (from ' .. origin .. ')'), h)
  check('checkhealth: the library file name of this OS', has(h, 'on ' .. jit.os .. ' the library file is ' .. capi.library_file_name()), h)
  check('checkhealth: the bridge next to the library', has(h, 'plugin tools bridge: '
    .. require('qwen_companion.plugins').bridge_next_to(path)), h)
  check('checkhealth: version and ABI', has(h, 'ABI ' .. capi.ABI_VERSION .. ' (the plugin needs ABI ' .. capi.ABI_VERSION
    .. ')') and has(h, 'version 0.'), h)
  check('checkhealth: the lock directory (configured, not created yet)', has(h, T .. '/core-locks (setup{ lock_dir }) does not exist yet'), h)
  check('checkhealth: IDE mode on (JSONC settings read)', has(h, 'IDE mode is on in ' .. SETTINGS .. ' (ide.enabled is true)'), h)
  check('checkhealth: not running', has(h, 'not running'), h)
  check('checkhealth: qwen and node against the tested versions', has(h, 'qwen 0.24.4 (' .. FAKEBIN
    .. '/qwen): the version the library was tested with') and has(h, 'node v22.12.0'), h)
  check('checkhealth: no ERROR line', not h:find('ERROR', 1, true), h)
  check("checkhealth: the library's report, one line per check", has(h, 'Library report')
    and has(h, 'library 0.1.0, ABI 1, linux-x86_64') and has(h, 'clis: 2 CLIs connected')
    and has(h, 'plugin_mcp: qwen-companion-plugins registered'), h)
  local saved = read(SETTINGS)
  write(SETTINGS, '{ "ide": { "enabled": false } }')
  h = health()
  check('checkhealth: IDE mode off is a warning with the fix', has(h, 'IDE mode is off: ide.enabled is false')
    and has(h, '/ide enable'), h)
  for _, bad in ipairs({ '{ "ide": { "enabled": true }', '{ "ide": { "enabled": true, } }' }) do
    write(SETTINGS, bad)
    h = health()
    check('checkhealth: a settings file Qwen Code cannot read is an error: ' .. bad, has(h, 'ERROR')
      and has(h, 'cannot read its settings'), h)
  end
  write(SETTINGS, saved)
  local jc = require('qwen_companion.health').parse_jsonc('{"a": "x, // y", /* c */ "b": [1, 2] // d\n}')
  check('parse_jsonc keeps strings, drops comments', jc and jc.a == 'x, // y' and #jc.b == 2, jc)
end)

step('start', function()
  qc.on_start(function(s)
    hooks.start[#hooks.start + 1] = { port = s.port, host = qc.plugin_host() ~= nil, plugins = s.plugins.running }
  end)
  qc.on_stop(function(s)
    hooks.stop[#hooks.stop + 1] = { port = s.port, host = qc.plugin_host() ~= nil, running = qc.status() ~= nil }
  end)
  qc.add_terminal_env(function()
    return { QCNV_EXTRA = 'from a provider' }
  end)
  check('plugin_host() is nil before start', qc.plugin_host() == nil)
  check('statusline is empty when stopped', qc.statusline() == '', qc.statusline())
  vim.cmd('QwenStart')
  local s = qc.status()
  local host = qc.plugin_host()
  check(':QwenStart runs the companion', s ~= nil)
  check('on_start ran once, after the plugin host started', #hooks.start == 1 and hooks.start[1].host
    and hooks.start[1].port == s.port and hooks.start[1].plugins, hooks.start)
  local late = {}
  local remove = qc.on_start(function(st)
    late[#late + 1] = st.port
  end)
  check('on_start registered while running is called at once', #late == 1 and late[1] == s.port, late)
  remove()
  check('plugin_host(): the host over plugins.dir', host and host.dir == PLUGINS, host and host.dir)
  local list, lerr = host:list()
  check('host:list() has the installed fixture plugin', list and #list == 1 and list[1].id == 'test.nvim-notify'
    and list[1].enabled, list or lerr)
  check('the plugins MCP server runs', host.mcp and host.mcp.url:find('^http://127%.0%.0%.1:%d+/mcp$') ~= nil
    and exists(host.mcp.lockFile), host.mcp)
  check('its tools: the plugin tool and plugins-status', host.mcp and vim.tbl_contains(host.mcp.tools, 'nvim-notify_notify')
    and vim.tbl_contains(host.mcp.tools, 'plugins-status'), host.mcp)
  local reg = s.plugins.registration
  check('registered in the user settings ($QWEN_HOME/settings.json)', reg and reg.ok and reg.settings == SETTINGS
    and reg.change == 'added' and reg.scope == 'user', reg)
  local bridge = QH .. '/companion/bin/qc-mcp-bridge'
  check('the bridge is copied to $QWEN_HOME/companion/bin (executable, same size)', uv.fs_access(bridge, 'X')
    and uv.fs_stat(bridge).size == uv.fs_stat(vim.fn.fnamemodify(s.lib, ':h') .. '/qc-mcp-bridge').size, bridge)
  local text = read(SETTINGS)
  check('the settings keep their comments and keys', has(text, '// my settings') and has(text, '"enabled": true')
    and has(text, '"theme": "a // not a comment"') and has(text, '"qwen-companion-plugins"'), text)
  check('statusline: running, no CLI yet', qc.statusline() == 'Qwen: no CLI', qc.statusline())
  local d = qc.statusline_data()
  check('statusline_data(): running, 0 clients, 0 diffs, no error', d.running and d.clients == 0 and d.diffs == 0
    and d.error == nil, d)
  -- the terminal env merges the MCP server's env (empty with the bridge) and the providers'
  host.mcp.env.QCNV_MCP_VAR = 'from the MCP info'
  qc.setup({ terminal = { cmd = { 'sh', '-c', '{ env; echo "QCNV_CWD=$(pwd -P)"; } >"$0.tmp" && mv "$0.tmp" "$0"',
    T .. '/run-env.txt' } } })
  vim.cmd('lcd ' .. vim.fn.fnameescape(T)) -- a window-local directory: the terminal still runs in the workspace
  vim.cmd('QwenRun')
end, function()
  return exists(T .. '/run-env.txt')
end)

step('run', function()
  local s = qc.status()
  local env = {}
  for line in (read(T .. '/run-env.txt') or ''):gmatch('[^\n]+') do
    local k, v = line:match('^([%w_]+)=(.*)$')
    if k then
      env[k] = v
    end
  end
  check(':QwenRun: the job has QWEN_CODE_IDE_SERVER_PORT', env.QWEN_CODE_IDE_SERVER_PORT == tostring(s.port), env)
  check(':QwenRun: ... QWEN_CODE_IDE_WORKSPACE_PATH', env.QWEN_CODE_IDE_WORKSPACE_PATH == WS, env)
  check(':QwenRun: ... the MCP server\'s env', env.QCNV_MCP_VAR == 'from the MCP info', env)
  check(':QwenRun: ... the add_terminal_env providers\' variables', env.QCNV_EXTRA == 'from a provider', env)
  check(':QwenRun: the terminal is in a split of the current tab, in the workspace',
    vim.bo.buftype == 'terminal' and #api.nvim_tabpage_list_wins(0) == 2 and vim.b.qwen_companion_terminal == true, {
      buftype = vim.bo.buftype, wins = #api.nvim_tabpage_list_wins(0) })
  check(':QwenRun: its cwd is the workspace (not the window\'s :lcd)', env.QCNV_CWD == WS, env.QCNV_CWD)
  check(':QwenRun: the terminal window has the focus, in terminal mode', vim.b.qwen_companion_terminal == true
    and api.nvim_get_mode().mode == 't', api.nvim_get_mode())
  -- :QwenEnv: the same variables as lines of the chosen shell; a line sh runs gives the value back
  vim.cmd('QwenEnv posix')
  local copied = vim.fn.getreg('"')
  check(':QwenEnv posix copies export lines', has(copied, "export QWEN_CODE_IDE_SERVER_PORT='" .. s.port .. "'\n")
    and has(copied, "export QWEN_CODE_IDE_WORKSPACE_PATH='" .. WS .. "'"), copied)
  local shout = vim.fn.system({ 'sh', '-c', copied .. 'printf %s "$QWEN_CODE_IDE_WORKSPACE_PATH"' })
  check(':QwenEnv posix lines run in sh give the workspace back', shout == WS, shout)
  qc.setup({ terminal = { shell = 'powershell' } })
  vim.cmd('QwenEnv')
  check(':QwenEnv follows terminal.shell (PowerShell)', has(vim.fn.getreg('"'), "$env:QWEN_CODE_IDE_SERVER_PORT = '" .. s.port .. "'"),
    vim.fn.getreg('"'))
  qc.setup({ terminal = { shell = 'auto' } })
  local bad, berr = pcall(qc.setup, { terminal = { shell = 'tcsh' } })
  check("setup refuses terminal.shell = 'tcsh'", not bad and has(tostring(berr), 'terminal.shell'), berr)
  local remove = qc.add_terminal_env(function()
    return { QCNV_BAD = 'a\nb' }
  end)
  local lines, lerr = require('qwen_companion.terminal').env_lines('cmd')
  remove()
  check('terminal.env_lines: cmd refuses a value with a line break, naming it', lines == nil
    and has(lerr, 'cmd cannot set QCNV_BAD') and has(lerr, 'PowerShell'), lerr)
  qc.plugin_host().mcp.env.QCNV_MCP_VAR = nil
  vim.cmd('bwipeout!')
  vim.cmd('lcd ' .. vim.fn.fnameescape(WS))
  vim.cmd('stopinsert')
  qc.setup({ terminal = { split = 'nosuchcommand' } })
  local sok, serr = require('qwen_companion.terminal').run()
  check('a terminal.split that is not an Ex command is a clear error', not sok and has(serr, 'terminal.split (nosuchcommand)'),
    serr)
  qc.setup({ terminal = { split = 'botright split', cmd = { '/nonexistent/qwen' } } })
  local wins = #api.nvim_tabpage_list_wins(0)
  local ok, err = require('qwen_companion.terminal').run()
  check('a terminal.cmd that cannot run is a clear error, no window left', not ok and has(err, '/nonexistent/qwen')
    and #api.nvim_tabpage_list_wins(0) == wins, { err, wins, #api.nvim_tabpage_list_wins(0) })
  local host = qc.plugin_host()
  emit('started', { lock_file = s.lock_file, port = s.port, mcp_lock = host.mcp.lockFile, settings = SETTINGS })
end, go('client'))

step('client', function() end, function()
  return (qc.status().clients or 0) == 1 -- run.sh's MCP client opened its stream
end)

step('clients', function()
  check('statusline: 1 connected CLI', qc.statusline() == 'Qwen: 1 CLI', qc.statusline())
  emit('clients')
end, go('notified')) -- run.sh calls the plugin tool through the bridge meanwhile

step('notification', function()
  local shown = vim.tbl_filter(function(n)
    -- shown by the plugin UI (qwen_companion.extras attaches it to the host)
    return has(n.msg, '[test.nvim-notify] From Qwen: through the bridge')
  end, notes)
  check('show_notification from the plugin (during an MCP call) became one vim.notify', #shown == 1, notes)
  check('... at INFO level', shown[1] and shown[1].level == vim.log.levels.INFO, shown)
  local logged = read(require('qwen_companion.log').path()) or ''
  check("the log file has the plugin host's events: the plugin started, its show_notification request",
    has(logged, 'INFO  plugins: plugin test.nvim-notify started')
    and has(logged, 'DEBUG plugins: show_notification request') and has(logged, 'from test.nvim-notify'), logged)
  check("the log file has the library's own log lines (pulled log events): the CLI's session connected",
    has(logged, 'companion: session ') and has(logged, ': connected, sending context'), logged)
  local host = qc.plugin_host()
  check('the host pulled its events (no callback)', host.events >= 1 and (lib_calls.qc_plugin_host_next_event or 0) >= 1
    and lib_calls.qc_plugin_host_respond >= 1, { host.events, lib_calls })
  emit('notification')
end, go('diff'))

step('diff shown', function() end, function()
  return #qc.status().diffs == 1
end)

step('diff pending', function()
  check('statusline: 1 CLI, 1 diff', qc.statusline() == 'Qwen: 1 CLI, 1 diff', qc.statusline())
  check('statusline_data(): diffs = 1', qc.statusline_data().diffs == 1, qc.statusline_data())
  vim.cmd('QwenDiffReject ' .. vim.fn.fnameescape(WS .. '/main.c'))
  check('statusline after the decision: 1 CLI', qc.statusline() == 'Qwen: 1 CLI', qc.statusline())
  local host = qc.plugin_host()
  local ok = host:respond(123456, { late = true })
  check('answering an unknown request fails', not ok)
  check('statusline: the last error, cut to 40 characters', qc.statusline():find('^Qwen: 1 CLI, error: qc_plugin_host_respond: QC_NOT_FOUND')
    ~= nil and vim.fn.strchars(qc.statusline():match('error: (.*)$')) == 40, qc.statusline())
  host.last_error = nil
  local h = health()
  check('checkhealth while running: the companion, the plugin host, its MCP server and registration',
    has(h, 'running on 127.0.0.1:' .. qc.status().port) and has(h, 'plugin host: ' .. PLUGINS)
      and has(h, 'plugins MCP server: http://127.0.0.1:') and has(h, 'registered as qwen-companion-plugins in '
      .. SETTINGS .. ' (added)') and has(h, 'connected CLIs: 1') and has(h, 'mode 700'), h)
  emit('diff')
end)

step('stop', function()
  local mcp_lock = qc.plugin_host().mcp.lockFile
  local port = qc.status().port
  vim.cmd('QwenStop')
  check('on_stop ran before the host and the companion were released', #hooks.stop == 1 and hooks.stop[1].host
    and hooks.stop[1].running and hooks.stop[1].port == port, hooks.stop)
  check('plugin_host() is nil after stop', qc.plugin_host() == nil)
  check('the plugins MCP lock file is removed', not exists(mcp_lock), mcp_lock)
  check('statusline is empty again', qc.statusline() == '')
  local mtime = uv.fs_stat(SETTINGS).mtime
  vim.cmd('QwenStart')
  check('restart: a new plugin host and MCP server', qc.plugin_host() ~= nil and qc.plugin_host().mcp ~= nil
    and #hooks.start == 2, hooks.start)
  check('restart: registered once per session (qc_mcp_register called once, settings not rewritten)',
    lib_calls.qc_mcp_register == 1 and vim.deep_equal(uv.fs_stat(SETTINGS).mtime, mtime)
      and qc.status().plugins.registration.change == 'added', { lib_calls.qc_mcp_register, qc.status().plugins })
  vim.cmd('QwenStop')
  qc.setup({ plugins = { enabled = false } })
  vim.cmd('QwenStart')
  check('plugins.enabled = false: no plugin host', qc.status() ~= nil and qc.plugin_host() == nil
    and not qc.status().plugins.running, qc.status())
  check('plugins.enabled = false: no MCP lock file', #vim.fn.glob(QH .. '/companion/plugins-mcp/*.lock', false, true) == 0)
  local h = health()
  check('checkhealth: plugin host disabled', has(h, 'plugin host disabled'), h)
  vim.cmd('QwenStop')
  emit('stopped')
end)

P.run(steps, STEP_TIMEOUT_MS, T .. '/nv-error.json')
