-- Headless Neovim test of the Gemini CLI side of the plugin (run by
-- tests/neovim/run.sh with its own HOME, QWEN_HOME, TMPDIR and XDG folders,
-- the library in $QWEN_COMPANION_LIB):
--   setup's `cli`, `gemini_command` and `gemini_dir` validation; the agent
--   commands and options; :GeminiToggle / :GeminiRun on the terminal
--   mechanism of :QwenToggle (start, hide, show, focus, reuse, float) with a
--   recorder program standing in for gemini (it writes its environment, then
--   every byte it gets in raw mode); its env = every terminal variable of the
--   companion; the warning when the companion does not serve Gemini CLI;
--   :QwenAdd typing into the agent terminal used last (started, focused,
--   entered); then the library's `both` and `gemini` (restart on a `cli`
--   change, the discovery files, the five variables, the health report's
--   gemini check, :checkhealth's Gemini CLI settings) and stop removing
--   the discovery files.
-- Writes $QCNV_TMP/nv-gemini.json.

local api = vim.api
local uv = vim.loop
local T = assert(os.getenv('QCNV_TMP'), 'QCNV_TMP')
local WS = assert(os.getenv('QCNV_WS'), 'QCNV_WS')
local TIMEOUT = tonumber(os.getenv('QCNV_TIMEOUT') or '30') * 1000
local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local check, read = C.check, C.read
local GDIR = T .. '/gemini-ide'

local write = C.write_file

local function has(text, needle)
  return type(text) == 'string' and text:find(needle, 1, true) ~= nil
end

local notes = {}
vim.notify = function(msg, level) -- recorded, not shown (an error message would abort a :command)
  notes[#notes + 1] = { msg = msg, level = level }
end
local function noted(needle, level)
  for _, n in ipairs(notes) do
    if has(n.msg, needle) and (level == nil or n.level == level) then
      return true
    end
  end
  return false
end

-- The recorder: writes its environment to $2, then in raw mode every byte
-- it gets to $1 (it stands in for qwen and gemini).
local REC_SH = T .. '/rec.sh'
write(REC_SH, '#!/bin/sh\nenv >"$2.tmp" && mv "$2.tmp" "$2"\nstty raw -echo\nexec cat >"$1"\n')
local function recorder(name)
  return { 'sh', REC_SH, T .. '/' .. name .. '.typed', T .. '/' .. name .. '.env' }
end
local function wait_ready(name)
  vim.wait(TIMEOUT, function()
    return uv.fs_stat(T .. '/' .. name .. '.typed') ~= nil
  end, 20)
  vim.wait(300) -- raw mode is on (stty ran before cat)
end
local function env_of(name)
  local env = {}
  for line in (read(T .. '/' .. name .. '.env') or ''):gmatch('[^\n]+') do
    local k, v = line:match('^([%w_]+)=(.*)$')
    if k then
      env[k] = v
    end
  end
  return env
end
-- Every variable of `want` has the same value in `got`.
local function has_all(got, want)
  for k, v in pairs(want) do
    if got[k] ~= v then
      return false
    end
  end
  return next(want) ~= nil
end
local function wait_gone(term, agent)
  vim.wait(TIMEOUT, function()
    return term.current(agent) == nil
  end, 20)
end

local function refused(qc, opts)
  local before = vim.deepcopy(qc.config)
  local ok, err = pcall(qc.setup, opts)
  return not ok and tostring(err) or nil, vim.deep_equal(before, qc.config)
end

local function options_and_pure(qc, term, prompt, hr)
  for _, c in ipairs({ 'GeminiRun', 'GeminiToggle' }) do
    check('plugin defines :' .. c, vim.fn.exists(':' .. c) == 2)
  end
  check("default cli: none set, 'qwen' served", qc.config.cli == nil and qc.cli() == 'qwen', qc.config.cli)
  vim.g.qwen_companion_cli = 'gemini'
  check('vim.g.qwen_companion_cli is read when setup has none', qc.cli() == 'gemini', qc.cli())
  vim.g.qwen_companion_cli = 'gpt'
  local sok, serr = qc.start()
  check('a wrong vim.g.qwen_companion_cli: start refused, naming it', sok == nil and qc.status() == nil
    and serr == "vim.g.qwen_companion_cli: expected 'qwen', 'gemini' or 'both', got \"gpt\"", serr)
  vim.g.qwen_companion_cli = nil
  check('default gemini_command: gemini', qc.config.gemini_command == 'gemini', qc.config.gemini_command)
  local cases = {
    { { cli = 'gpt' }, "cli: expected nil, 'qwen', 'gemini' or 'both', got gpt" },
    { { cli = 3 }, "cli: expected nil, 'qwen', 'gemini' or 'both', got 3" },
    { { cli = 'Both' }, "cli: expected nil, 'qwen', 'gemini' or 'both', got Both" },
    { { gemini_command = {} }, 'gemini_command: expected nil, a non-empty string or a list of strings' },
    { { gemini_command = { 'gemini', 3 } }, 'gemini_command: expected nil, a non-empty string or a list of strings' },
    { { gemini_command = '' }, 'gemini_command: expected nil, a non-empty string or a list of strings' },
    { { gemini_dir = 5 }, 'gemini_dir: expected nil or string, got 5' },
    { { gemini = true }, 'unknown option gemini' },
  }
  for _, c in ipairs(cases) do
    local err, same = refused(qc, c[1])
    check('setup(' .. vim.inspect(c[1]):gsub('%s+', ' ') .. ') is refused: ' .. c[2], has(err, c[2]), err)
    check('... and changes nothing', same)
  end
  for _, v in ipairs({ 'qwen', 'gemini', 'both' }) do
    check("setup{ cli = '" .. v .. "' } is taken", pcall(qc.setup, { cli = v }) and qc.config.cli == v)
  end
  local config = require('qwen_companion.config')
  local ok, err = config.check_cli('claude', 'vim.g.qwen_companion_cli')
  check('check_cli names the value and the accepted ones', ok == nil
    and err == "vim.g.qwen_companion_cli: expected 'qwen', 'gemini' or 'both', got \"claude\"", err)
  qc.setup({ cli = 'qwen' })

  check('agent command: terminal.cmd for qwen, gemini_command for gemini', vim.deep_equal(term.agent_command('qwen',
    { terminal = { cmd = { 'q', '-y' } } }), { 'q', '-y' }) and term.agent_command('gemini', { gemini_command = 'g --yolo' })
    == 'g --yolo' and term.agent_command('gemini', { terminal = { cmd = 'q' } }) == 'gemini'
    and term.agent_command('qwen', {}) == 'qwen')
  local aok, aerr = pcall(term.state, 'claude')
  check('an unknown agent is an error naming it', not aok and has(aerr, "unknown agent \"claude\""), aerr)
  check("served: gemini only for cli 'gemini' and 'both'", term.served('gemini', { cli = 'both' })
    and term.served('gemini', { cli = 'gemini' }) and not term.served('gemini', { cli = 'qwen' })
    and not term.served('qwen', { cli = 'gemini' }) and term.served('qwen', {}) and not term.served('qwen', nil))
  local none, why = prompt.reference('/other/x.c', '/ws', nil, nil, 'Linux', 'Gemini CLI')
  check('reference: the CLI is named in the refusal', none == nil and has(why, 'Gemini CLI only reads files inside it'), why)
  none, why = prompt.reference('C:\\ws\\a b.py', 'C:\\ws', nil, nil, 'Windows', 'Gemini CLI')
  check('reference on Windows: the refusal names Gemini CLI', none == nil and has(why, 'Gemini CLI on Windows'), why)

  check("health options for cli 'qwen': no gemini, no cli (the library's default)", vim.deep_equal(hr.options({ cli = 'qwen',
    gemini_command = { '/opt/gemini' }, terminal = { cmd = 'qwen' }, plugins = {} }), { qwen = 'qwen' }))
  check("health options for cli 'both': cli and the gemini program", vim.deep_equal(hr.options({ cli = 'both',
    gemini_command = { '/opt/gemini', '-y' }, terminal = {}, plugins = {} }), { cli = 'both', gemini = '/opt/gemini' }))
  check('health options: a gemini shell line gives no program', hr.options({ cli = 'gemini', gemini_command = 'gemini --yolo',
    terminal = {}, plugins = {} }).gemini == nil)
  local sl = hr.served_lines({ cli = 'both', discovery_files = { qwen = '/h/.qwen/ide/1.lock', gemini = '/t/g.json' } }, '  ')
  check('served lines: the CLIs and each discovery file', vim.deep_equal(sl, { "  serves: Qwen Code and Gemini CLI (cli = 'both')",
    '  Qwen Code discovery file: /h/.qwen/ide/1.lock', '  Gemini CLI discovery file: /t/g.json' }), sl)
  local health = require('qwen_companion.health')
  local home = vim.env.GEMINI_CLI_HOME
  vim.env.GEMINI_CLI_HOME = '/gh'
  check('Gemini settings path: $GEMINI_CLI_HOME/.gemini/settings.json', health.gemini_settings_path() == '/gh/.gemini/settings.json',
    health.gemini_settings_path())
  vim.env.GEMINI_CLI_HOME = home
  check('Gemini settings path: ~/.gemini/settings.json', health.gemini_settings_path() == vim.fn.expand('~') .. '/.gemini/settings.json',
    health.gemini_settings_path())
end

-- :GeminiToggle / :GeminiRun with the companion serving Qwen Code only.
local function gemini_terminal(qc, term)
  qc.setup({ gemini_command = recorder('g1'), gemini_dir = GDIR, terminal = { cmd = recorder('q1'), position = 'right' },
    plugins = { enabled = false } })
  local editor_win = api.nvim_get_current_win()
  notes = {}
  vim.cmd('GeminiToggle')
  local t = term.current('gemini')
  check(':GeminiToggle with no terminal starts one (companion started too) and focuses it', t ~= nil
    and term.state('gemini') == 'focused' and qc.status() ~= nil and api.nvim_get_current_buf() == t.buf)
  check('... running gemini_command in the workspace root', t and vim.deep_equal(t.cmd, recorder('g1'))
    and t.cwd == vim.fn.getcwd() and t.agent == 'gemini', t)
  check('... its buffer is marked as the Gemini CLI terminal', t and vim.b[t.buf].qwen_companion_terminal == true
    and vim.b[t.buf].qwen_companion_agent == 'gemini')
  check("... a warning: the companion does not serve Gemini CLI (cli = 'qwen')", noted('Gemini CLI runs without the IDE connection',
    vim.log.levels.WARN) and noted("setup{ cli = 'gemini' } or cli = 'both'"), notes)
  check('the Qwen Code terminal is not started by it', term.state('qwen') == 'none' and term.current() == nil)
  wait_ready('g1')
  local env, want = env_of('g1'), qc.status().env
  check('the Gemini CLI terminal has every variable of terminal_env_json', has_all(env, want), { env = env, want = want })
  check('... the same as the library gives (Qwen Code\'s port and workspace)', want.QWEN_CODE_IDE_SERVER_PORT
    == tostring(qc.status().port) and want.QWEN_CODE_IDE_WORKSPACE_PATH == vim.fn.getcwd(), want)

  local st = term.toggle('gemini')
  check(':GeminiToggle on the focused terminal hides it, the job keeps running', st == 'hidden'
    and term.state('gemini') == 'hidden' and #term.windows('gemini') == 0 and term.current('gemini') ~= nil, st)
  vim.cmd('GeminiToggle')
  check(':GeminiToggle on a hidden terminal shows and focuses the same one', term.state('gemini') == 'focused'
    and term.current('gemini').buf == t.buf and api.nvim_get_current_buf() == t.buf)
  api.nvim_set_current_win(editor_win)
  check('visible but not focused: state visible', term.state('gemini') == 'visible')
  st = term.toggle('gemini')
  check(':GeminiToggle on a visible terminal focuses it (does not hide it)', st == 'focused' and #term.windows('gemini') == 1)
  local nbufs = #api.nvim_list_bufs()
  notes = {}
  api.nvim_set_current_win(editor_win)
  vim.cmd('GeminiRun --yolo')
  check(':GeminiRun while it runs reuses it (same buffer, no new one) and focuses it', api.nvim_get_current_buf() == t.buf
    and #api.nvim_list_bufs() == nbufs and term.current('gemini').job == t.job)
  check('... and says the arguments were not used', noted('Gemini CLI already runs in its terminal', vim.log.levels.WARN)
    and noted('--yolo'), notes)

  -- float: the same layouts as :QwenToggle
  term.hide('gemini')
  qc.setup({ terminal = { position = 'float', size = 0.6 } })
  vim.cmd('GeminiToggle')
  local fwin = api.nvim_get_current_win()
  local fc = api.nvim_win_get_config(fwin)
  check("position float: :GeminiToggle shows it in a floating window", fc.relative == 'editor'
    and api.nvim_get_current_buf() == t.buf and math.abs(api.nvim_win_get_width(fwin) - vim.o.columns * 0.6) <= 2, fc)
  vim.cmd('GeminiToggle')
  check('... toggling again closes the float, the job stays', not api.nvim_win_is_valid(fwin) and term.current('gemini') ~= nil)
  qc.setup({ terminal = { position = 'right' } })
  pcall(vim.cmd, 'silent! only')
  return t
end

-- :QwenAdd types into the agent terminal used last.
local function routing(qc, term, g)
  write(WS .. '/notes.txt', 'one\ntwo\nthree\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/notes.txt'))
  local file_win = api.nvim_get_current_win()
  check('last used: the Gemini CLI terminal (the only one running)', term.last_used() == 'gemini', term.last_used())
  vim.cmd('QwenToggle')
  local q = term.current('qwen')
  check(':QwenToggle starts the Qwen Code terminal next to it', q ~= nil and term.current('gemini') ~= nil and q.buf ~= g.buf)
  check('last used: Qwen Code (started after)', term.last_used() == 'qwen', term.last_used())
  wait_ready('q1')
  check('the Qwen Code terminal gets the same variables', has_all(env_of('q1'), qc.status().env), env_of('q1'))
  api.nvim_set_current_win(file_win)
  local text, agent = require('qwen_companion.prompt').add({})
  check(':QwenAdd types into the Qwen Code terminal and says so', text == '@notes.txt ' and agent == 'qwen', { text, agent })
  check('... and focuses it', api.nvim_get_current_buf() == q.buf)

  vim.cmd('GeminiToggle') -- shown and focused: now the one used last
  check(':GeminiToggle focuses the Gemini CLI terminal: last used gemini', term.last_used() == 'gemini'
    and api.nvim_get_current_buf() == g.buf, term.last_used())
  api.nvim_set_current_win(file_win)
  vim.cmd('2,3QwenAdd')
  check(':2,3QwenAdd then goes to the Gemini CLI terminal (focused)', api.nvim_get_current_buf() == g.buf)

  -- entering the Qwen Code window by hand makes it the one used last
  api.nvim_set_current_win(vim.fn.win_findbuf(q.buf)[1])
  check('entering the Qwen Code window (no command): last used qwen', term.last_used() == 'qwen', term.last_used())
  api.nvim_set_current_win(file_win)
  vim.cmd('QwenAdd')
  vim.wait(TIMEOUT, function()
    return read(T .. '/q1.typed') == '@notes.txt @notes.txt ' and read(T .. '/g1.typed') == '@notes.txt (lines 2-3) '
  end, 20)
  check('Qwen Code got exactly its two references', read(T .. '/q1.typed') == '@notes.txt @notes.txt ', read(T .. '/q1.typed'))
  check('Gemini CLI got exactly its one (same @path syntax, the range in words)',
    read(T .. '/g1.typed') == '@notes.txt (lines 2-3) ', read(T .. '/g1.typed'))

  -- the one used last ends: the other one gets the text
  api.nvim_set_current_win(vim.fn.win_findbuf(q.buf)[1])
  C.end_job(q.job)
  wait_gone(term, 'qwen')
  check('Qwen Code used last but ended: last used gemini', term.last_used() == 'gemini', term.last_used())
  pcall(vim.cmd, 'silent! only')
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/notes.txt'))
  local t2, a2 = require('qwen_companion.prompt').add({})
  check('... :QwenAdd types into Gemini CLI then', t2 == '@notes.txt ' and a2 == 'gemini', { t2, a2 })
  C.end_job(g.job)
  wait_gone(term, 'gemini')
  pcall(vim.cmd, 'silent! only')
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/notes.txt'))
  local none, err = require('qwen_companion.prompt').add({})
  check('no agent terminal: :QwenAdd types nothing and names both toggles', none == nil and has(err, ':QwenToggle')
    and has(err, ':GeminiToggle') and term.last_used() == nil, err)
end

-- The library serving Gemini CLI: cli = 'both', then 'gemini'.
local function served(qc, term)
  local s0 = qc.status()
  notes = {}
  qc.setup({ cli = 'both' })
  local s = qc.status()
  check("setup{ cli = 'both' } restarts the running companion", s ~= nil and s.cli == 'both'
    and noted("restarted to serve cli = 'both'"), { status = s, notes = notes })
  check('... the old lock file is gone', s0 and s0.lock_file and uv.fs_stat(s0.lock_file) == nil, s0)
  if not s then
    return
  end
  local files = s and s.discovery_files or {}
  local pid = vim.fn.getpid()
  check('discovery files: Qwen Code\'s lock file (lock_file) and Gemini CLI\'s file in gemini_dir', files.qwen == s.lock_file
    and files.gemini == GDIR .. '/gemini-ide-server-' .. pid .. '-' .. s.port .. '.json', files)
  check('... both exist', files.qwen and uv.fs_stat(files.qwen) ~= nil and files.gemini and uv.fs_stat(files.gemini) ~= nil)
  local ok, g = pcall(vim.fn.json_decode, read(files.gemini or '') or '')
  check("Gemini CLI's file: the port, the workspace, a token, ideInfo", ok and type(g) == 'table' and g.port == s.port
    and g.workspacePath == vim.fn.getcwd() and type(g.authToken) == 'string' and #g.authToken >= 32
    and type(g.ideInfo) == 'table' and g.ideInfo.name == 'neovim' and g.ideInfo.displayName == 'Neovim', g)
  local want = { QWEN_CODE_IDE_SERVER_PORT = tostring(s.port), QWEN_CODE_IDE_WORKSPACE_PATH = vim.fn.getcwd(),
    GEMINI_CLI_IDE_SERVER_PORT = tostring(s.port), GEMINI_CLI_IDE_WORKSPACE_PATH = vim.fn.getcwd(),
    GEMINI_CLI_IDE_PID = tostring(pid) }
  check('terminal env: the five variables of both CLIs', vim.deep_equal(s.env, want), s.env)
  check("... set in Neovim's environment too", vim.env.GEMINI_CLI_IDE_SERVER_PORT == tostring(s.port)
    and vim.env.GEMINI_CLI_IDE_PID == tostring(pid) and vim.env.QWEN_CODE_IDE_SERVER_PORT == tostring(s.port))

  notes = {}
  qc.setup({ gemini_command = recorder('g2') })
  vim.cmd('GeminiRun')
  local t = term.current('gemini')
  wait_ready('g2')
  check(':GeminiRun when Gemini CLI is served: no warning', t ~= nil and not noted('without the IDE connection'), notes)
  check('... its job has the five variables', has_all(env_of('g2'), want), env_of('g2'))

  local hr = require('qwen_companion.health_report')
  local lines = table.concat(hr.neovim_lines(), '\n')
  check(':QwenHealth names the CLIs served and their discovery files', has(lines, "serves: Qwen Code and Gemini CLI (cli = 'both')")
    and has(lines, 'Gemini CLI discovery file: ' .. files.gemini) and has(lines, 'Qwen Code discovery file: ' .. files.qwen)
    and has(lines, 'Gemini CLI terminal: focused') and has(lines, ':QwenAdd types here'), lines)
  -- the library's report with a fake gemini of the tested version
  local fake = T .. '/fakebin/gemini'
  write(fake, '#!/bin/sh\necho 0.61.0\n')
  uv.fs_chmod(fake, tonumber('755', 8))
  qc.setup({ gemini_command = { fake } })
  local report, rerr = hr.library_report()
  local gcheck
  for _, c in ipairs(report and report.checks or {}) do
    if c.id == 'gemini' then
      gcheck = c
    end
  end
  check("the library's report has the gemini check: the fake gemini, 0.61.0", gcheck ~= nil and gcheck.status == 'ok'
    and has(vim.inspect(gcheck), '0.61.0'), gcheck or report or rerr)
  check(':QwenHealth shows it', has(table.concat(hr.lines(), '\n'), '] gemini: '), hr.lines())

  -- :checkhealth: Gemini CLI's settings
  local gs = require('qwen_companion.health').gemini_settings_path()
  local function checkhealth()
    vim.cmd('checkhealth qwen_companion')
    local text = table.concat(api.nvim_buf_get_lines(0, 0, -1, false), '\n')
    vim.cmd('bwipeout!')
    return text
  end
  write(gs, '{ "ide": { "enabled": true } }')
  local h = checkhealth()
  check(':checkhealth runs to its end (every check of the report shown)', not has(h, 'Failed to run healthcheck')
    and has(h, 'gemini: '), h)
  check(':checkhealth: Gemini CLI IDE mode on in ~/.gemini/settings.json', has(h, 'Gemini CLI settings')
    and has(h, 'IDE mode is on in ' .. gs), h)
  check(':checkhealth: the CLIs served and the discovery files', has(h, "serves: Qwen Code and Gemini CLI (cli = 'both')")
    and has(h, 'Gemini CLI discovery file: ' .. files.gemini), h)
  write(gs, '{}')
  h = checkhealth()
  check(':checkhealth: Gemini CLI IDE mode off is a warning with the fix', has(h, 'Gemini CLI IDE mode is off')
    and has(h, '/ide enable` in gemini'), h)

  C.end_job(t.job)
  wait_gone(term, 'gemini')
  pcall(vim.cmd, 'silent! only')

  -- Gemini CLI only
  notes = {}
  qc.setup({ cli = 'gemini', terminal = { cmd = recorder('q2') } })
  s = qc.status()
  check("setup{ cli = 'gemini' }: restarted, only Gemini CLI's discovery file", s and s.cli == 'gemini'
    and s.discovery_files.qwen == nil and s.discovery_files.gemini ~= nil and uv.fs_stat(s.discovery_files.gemini) ~= nil
    and uv.fs_stat(files.gemini) == nil, s)
  check("... only Gemini CLI's variables", s and s.env.GEMINI_CLI_IDE_SERVER_PORT == tostring(s.port)
    and s.env.QWEN_CODE_IDE_SERVER_PORT == nil and vim.env.QWEN_CODE_IDE_SERVER_PORT == nil, s and s.env)
  vim.cmd('QwenRun')
  check(':QwenRun when Qwen Code is not served: it starts, with a warning', term.current('qwen') ~= nil
    and noted('Qwen Code runs without the IDE connection', vim.log.levels.WARN) and noted("setup{ cli = 'qwen' }"), notes)
  C.end_job(term.current('qwen').job)
  wait_gone(term, 'qwen')

  local gfile = s.discovery_files.gemini
  qc.stop()
  check('stop removes the discovery file and the Gemini CLI variables', uv.fs_stat(gfile) == nil
    and vim.env.GEMINI_CLI_IDE_SERVER_PORT == nil and vim.env.GEMINI_CLI_IDE_PID == nil)
  h = checkhealth()
  check(":checkhealth while stopped with cli = 'gemini': the settings checked", has(h, 'Gemini CLI IDE mode is off'), h)
  qc.setup({ cli = 'qwen' })
  h = checkhealth()
  check(":checkhealth with cli = 'qwen': Gemini CLI not served, how to serve it", has(h, "Gemini CLI is not served (cli = 'qwen')"), h)
end

local function run()
  vim.cmd('runtime plugin/qwen_companion.lua')
  local qc = require('qwen_companion')
  local term = require('qwen_companion.terminal')
  options_and_pure(qc, term, require('qwen_companion.prompt'), require('qwen_companion.health_report'))
  local g = gemini_terminal(qc, term)
  routing(qc, term, g)
  served(qc, term)
end

C.run_guarded(run, 'the test ran to its end')
C.finish(T .. '/nv-gemini.json')
