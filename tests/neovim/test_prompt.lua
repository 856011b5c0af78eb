-- Headless Neovim test of what reaches the agent from Neovim (run by
-- tests/neovim/run.sh with its own HOME, QWEN_HOME and XDG folders, the
-- library next to the plugin or $QWEN_COMPANION_LIB):
--   :QwenAdd's reference text (escapes, ranges, outside the workspace,
--   Windows), what it types into the managed terminal (a recorder program
--   in raw mode stands in for qwen: it writes every byte it gets), the
--   no-terminal case; :QwenToggle's states (start, hide, show, focus) for
--   a right split, a bottom split and a float; :QwenRun reusing the
--   terminal; the editor tools (diagnostics with byte → character columns
--   and multibyte text, severity filter, open file and its errors, open
--   editors, selection); the log file (format, rotation at the bound,
--   :QwenLog); the health report's display from a fixture; diff labels;
--   :QwenCloseAllDiffs on two diffs opened by an MCP client.
-- Writes $QCNV_TMP/nv-prompt.json.

local api = vim.api
local uv = vim.loop
local T = assert(os.getenv('QCNV_TMP'), 'QCNV_TMP')
local WS = assert(os.getenv('QCNV_WS'), 'QCNV_WS')
local ROOT = assert(os.getenv('QCNV_ROOT'), 'QCNV_ROOT')
local PY = os.getenv('PYTHON') or 'python3'
local TIMEOUT = tonumber(os.getenv('QCNV_TIMEOUT') or '30') * 1000
local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local check, read = C.check, C.read

local write = C.write_file

local notes = {}
vim.notify = function(msg, level) -- recorded, not shown (an error message would abort a :command)
  notes[#notes + 1] = { msg = msg, level = level }
end

local function run()
  vim.cmd('runtime plugin/qwen_companion.lua')
  local qc = require('qwen_companion')
  local prompt = require('qwen_companion.prompt')
  local term = require('qwen_companion.terminal')
  local tools = require('qwen_companion.editor_tools')
  local log = require('qwen_companion.log')

  for _, c in ipairs({ 'QwenAdd', 'QwenToggle', 'QwenRun', 'QwenCloseAllDiffs', 'QwenLog', 'QwenHealth' }) do
    check('plugin defines :' .. c, vim.fn.exists(':' .. c) == 2)
  end

  -- 1. the reference text ---------------------------------------------------
  local cases = {
    { '/ws/src/app.py', nil, nil, '@src/app.py ' },
    { '/ws/src/app.py', 10, 20, '@src/app.py (lines 10-20) ' },
    { '/ws/src/app.py', 20, 10, '@src/app.py (lines 10-20) ' },
    { '/ws/src/app.py', 7, 7, '@src/app.py (lines 7-7) ' },
    { '/ws/my dir/a b.txt', nil, nil, '@my\\ dir/a\\ b.txt ' },
    { '/ws/f(1)[2]{3}.c', nil, nil, '@f\\(1\\)\\[2\\]\\{3\\}.c ' },
    { "/ws/it's \"q\".md", nil, nil, "@it\\'s\\ \\\"q\\\".md " },
    { '/ws/a,b;c!d?e*f$g`h#i&j<k>l|m~n', nil, nil, '@a\\,b\\;c\\!d\\?e\\*f\\$g\\`h\\#i\\&j\\<k\\>l\\|m\\~n ' },
    { '/ws/tab\there', nil, nil, '@tab\\\there ' },
    { '/ws/ünï cödé/ß.lua', 1, 2, '@ünï\\ cödé/ß.lua (lines 1-2) ' },
    { '/ws/plain-name_1.2+x@y=z%.txt', nil, nil, '@plain-name_1.2+x@y=z%.txt ' },
  }
  for _, c in ipairs(cases) do
    local got = prompt.reference(c[1], '/ws', c[2], c[3], 'Linux')
    check(string.format('reference %q%s -> %q', c[1], c[2] and (' lines ' .. c[2] .. '-' .. c[3]) or '', c[4]),
      got == c[4], got)
  end
  check('reference: the root given with a trailing slash', prompt.reference('/ws/x.c', '/ws/', nil, nil, 'Linux') == '@x.c ')
  local none, why = prompt.reference('/other/x.c', '/ws', nil, nil, 'Linux')
  check('reference: a file outside the workspace is refused with a reason', none == nil and why:find('outside', 1, true) ~= nil, why)
  none, why = prompt.reference('/wsx/x.c', '/ws', nil, nil, 'Linux')
  check('reference: /wsx is not inside /ws', none == nil, why)
  check('reference on Windows: forward slashes, case-insensitive root',
    prompt.reference('C:\\WS\\src\\x.py', 'c:\\ws', 3, 4, 'Windows') == '@src/x.py (lines 3-4) ')
  none, why = prompt.reference('C:\\ws\\a b.py', 'C:\\ws', nil, nil, 'Windows')
  check('reference on Windows: a path with a space is refused (Qwen Code does not unescape there)',
    none == nil and why:find('Windows', 1, true) ~= nil, why)

  -- 2. no terminal: nothing typed, a clear message -----------------------------
  write(WS .. '/main.c', 'int main(void) {\n  return 0;\n}\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/main.c'))
  local ok, err = prompt.add({})
  check(':QwenAdd without a qwen terminal types nothing and says how to start one',
    ok == nil and err:find(':QwenToggle', 1, true) ~= nil, err)
  notes = {}
  vim.cmd('QwenAdd')
  check('... the command reports it (an error notification)', #notes == 1 and notes[1].level == vim.log.levels.ERROR
    and notes[1].msg:find('no Qwen Code or Gemini CLI terminal', 1, true) ~= nil, notes)
  check('terminal state: none', term.state() == 'none')

  -- 3. the terminal: toggle, add, reuse ---------------------------------------
  local REC = T .. '/typed.bin'
  local recorder = { 'sh', '-c', 'stty raw -echo; exec cat > "$0"', REC }
  qc.setup({ terminal = { cmd = recorder, position = 'right', size = 0.5 }, plugins = { enabled = false } })
  local editor_win = api.nvim_get_current_win()
  local st, terr = term.toggle()
  check(':QwenToggle with no terminal starts one (companion started too) and focuses it', st == 'focused'
    and term.state() == 'focused' and qc.status() ~= nil, { st, terr })
  local t = term.current()
  check('... in the workspace root, running the configured command', t and t.cwd == vim.fn.getcwd()
    and vim.deep_equal(t.cmd, recorder), t)
  local win = api.nvim_get_current_win()
  check('... a split on the right, half the width', api.nvim_win_get_config(win).relative == ''
    and vim.fn.winnr() == vim.fn.winnr('$') and math.abs(api.nvim_win_get_width(win) - vim.o.columns / 2) <= 2,
    { api.nvim_win_get_width(win), vim.o.columns })
  check('... the companion env is passed to the job', t and t.env.QWEN_CODE_IDE_SERVER_PORT == tostring(qc.status().port), t and t.env)
  vim.wait(TIMEOUT, function()
    return uv.fs_stat(REC) ~= nil
  end, 20)
  vim.wait(300) -- the recorder switched its pty to raw mode (stty ran before cat)

  st = term.toggle()
  check(':QwenToggle on the focused terminal hides it', st == 'hidden' and term.state() == 'hidden'
    and #term.windows() == 0, st)
  check('... the job keeps running', term.current() ~= nil and vim.fn.jobwait({ t.job }, 0)[1] == -1)
  st = term.toggle()
  check(':QwenToggle on a hidden terminal shows and focuses the same one', st == 'focused'
    and term.current().buf == t.buf and api.nvim_get_current_buf() == t.buf)
  api.nvim_set_current_win(editor_win)
  check('terminal visible but not focused: state visible', term.state() == 'visible')
  st = term.toggle()
  check(':QwenToggle on a visible terminal focuses it (does not hide it)', st == 'focused' and #term.windows() == 1)
  api.nvim_set_current_win(editor_win)

  -- :QwenAdd from the file buffer, with a path needing escapes, with a range
  local odd = WS .. '/my dir/it\'s (v2) [draft], #1.txt'
  write(odd, 'one\ntwo\nthree\nfour\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(odd))
  local want1 = "@my\\ dir/it\\'s\\ \\(v2\\)\\ \\[draft\\]\\,\\ \\#1.txt "
  vim.cmd('QwenAdd')
  check(':QwenAdd focuses the terminal afterwards', api.nvim_get_current_buf() == t.buf)
  vim.cmd('wincmd p')
  vim.cmd('2,3QwenAdd')
  vim.cmd('wincmd p')
  vim.cmd("normal! Vj\27")
  vim.cmd("'<,'>QwenAdd")
  vim.cmd('wincmd p')
  vim.cmd('QwenAdd ' .. vim.fn.fnameescape(WS .. '/main.c'))
  local want = want1 .. want1:sub(1, -2) .. ' (lines 2-3) ' .. want1:sub(1, -2) .. ' (lines 1-2) @main.c '
  vim.wait(TIMEOUT, function()
    return read(REC) == want
  end, 20)
  local typed = read(REC)
  check('the terminal got exactly the typed references (escapes, ranges, visual range, a PATH argument)', typed == want,
    { got = typed, want = want })
  check('... no Enter (no CR / LF) was typed', typed ~= nil and not typed:find('[\r\n]'))
  check('... each one ends with a space', typed ~= nil and typed:sub(-1) == ' ')

  vim.cmd('wincmd p')
  ok, err = prompt.add({ path = WS .. '/missing.txt' })
  check(':QwenAdd of a file that does not exist types nothing', ok == nil and err:find('no such file', 1, true) ~= nil, err)
  vim.cmd('enew')
  ok, err = prompt.add({})
  check(':QwenAdd in a buffer without a file types nothing', ok == nil and err:find('not a file', 1, true) ~= nil, err)
  vim.cmd('bwipeout!')
  check('... nothing more reached the terminal', read(REC) == want)

  local nbufs = #api.nvim_list_bufs()
  notes = {}
  local rok, info = term.run({ '--extra' })
  check(':QwenRun while the terminal runs reuses it (same job, no new buffer) and focuses it',
    rok and info.job == t.job and #api.nvim_list_bufs() == nbufs and api.nvim_get_current_buf() == t.buf, info)
  check('... and says the arguments were not used', #notes == 1 and notes[1].msg:find('already runs', 1, true) ~= nil, notes)

  -- the terminal's job ends: toggle starts a new one
  C.end_job(t.job)
  vim.wait(TIMEOUT, function()
    return term.current() == nil
  end, 20)
  check('the job ended: state none', term.state() == 'none')
  local dead = t.buf
  st = term.toggle()
  check(':QwenToggle after qwen exited starts a new terminal and drops the old buffer', st == 'focused'
    and term.current() and term.current().job ~= t.job and not api.nvim_buf_is_valid(dead))
  C.end_job(term.current().job)
  vim.wait(TIMEOUT, function()
    return term.current() == nil
  end, 20)
  pcall(vim.cmd, 'silent! only')

  -- float and bottom
  qc.setup({ terminal = { position = 'float', size = 0.6 } })
  st = term.toggle()
  local fwin = api.nvim_get_current_win()
  local fc = api.nvim_win_get_config(fwin)
  check('position float: :QwenToggle opens a floating window (0.6 of the editor)', st == 'focused' and fc.relative == 'editor'
    and math.abs(api.nvim_win_get_width(fwin) - vim.o.columns * 0.6) <= 2, fc)
  st = term.toggle()
  check('... toggling again closes the float, the job stays', st == 'hidden' and not api.nvim_win_is_valid(fwin)
    and term.current() ~= nil)
  qc.setup({ terminal = { position = 'bottom', size = 7 } })
  st = term.toggle()
  check('position bottom, size 7: a split 7 lines high at the bottom', st == 'focused'
    and api.nvim_win_get_height(0) == 7 and vim.fn.winnr() == vim.fn.winnr('$'))
  check('split_command: right 0.4 of 100 columns', term.split_command({}, 100, 40) == 'botright 40vsplit')
  check('split_command: terminal.split wins', term.split_command({ split = 'topleft split', position = 'float' }, 100, 40)
    == 'topleft split')
  check('cells: a fraction, a number, bounded', term.cells(0.25, 80, 0.4) == 20 and term.cells(500, 80, 0.4) == 79
    and term.cells(nil, 80, 0.4) == 32)
  C.end_job(term.current().job)
  vim.wait(TIMEOUT, function()
    return term.current() == nil
  end, 20)
  pcall(vim.cmd, 'silent! only')
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/main.c'))

  -- 4. editor tools ---------------------------------------------------------------
  local s = 'aé€𝄞x' -- 1, 2, 3 and 4 bytes, then x (bytes 0,1,3,6,10)
  check('char_col: byte 0 -> column 1', tools.char_col(s, 0) == 1)
  check('char_col: after é (byte 3) -> column 3', tools.char_col(s, 3) == 3)
  check('char_col: x at byte 10 -> column 5', tools.char_col(s, 10) == 5)
  check('char_col: inside € (byte 4) -> € (column 3)', tools.char_col(s, 4) == 3, tools.char_col(s, 4))
  check('char_col: the end (byte 11) -> column 6, past it counts bytes', tools.char_col(s, 11) == 6 and tools.char_col(s, 13) == 8)
  check('byte_col: column 4 (𝄞) -> byte 6, past the end -> the length', tools.byte_col(s, 4) == 6 and tools.byte_col(s, 9) == #s)

  local dpath = WS .. '/diag.py'
  write(dpath, 'x = "héllo" + y\nprint(zz)\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(dpath))
  local dbuf = api.nvim_get_current_buf()
  local ns = api.nvim_create_namespace('qc_test')
  -- y at byte 15 (é is 2 bytes) = column 15; zz at bytes 6..8 of line 2
  vim.diagnostic.set(ns, dbuf, {
    { lnum = 0, col = 15, end_lnum = 0, end_col = 16, severity = vim.diagnostic.severity.ERROR,
      message = 'undefined name y', source = 'pyflakes', code = 'F821' },
    { lnum = 1, col = 6, end_lnum = 1, end_col = 8, severity = vim.diagnostic.severity.WARN, message = 'zz?' },
    { lnum = 1, col = 0, severity = vim.diagnostic.severity.HINT, message = 'a hint' },
  })
  local res = tools.diagnostics({ path = dpath })
  check('diagnostics of a file: 3 entries, sorted by line and column', #res.diagnostics == 3, res)
  local d1 = res.diagnostics[1]
  check('... byte column 15 after a 2-byte é is character column 15 (1-based), end 16', d1.path == dpath and d1.line == 1
    and d1.column == 15 and d1.endLine == 1 and d1.endColumn == 16 and d1.severity == 'error'
    and d1.message == 'undefined name y' and d1.source == 'pyflakes' and d1.code == 'F821', d1)
  check('... severities named warning / hint, no source or code when unset', res.diagnostics[3].severity == 'warning'
    and res.diagnostics[2].severity == 'hint' and res.diagnostics[2].source == nil and res.diagnostics[2].code == nil,
    res.diagnostics)
  res = tools.diagnostics({ path = dpath, severity = 'warning' })
  check('severity warning: error and warning, not the hint', #res.diagnostics == 2, res)
  res = tools.diagnostics({ severity = 'error' })
  check('no path: every buffer, severity error: one', #res.diagnostics == 1 and res.diagnostics[1].path == dpath, res)
  res = tools.diagnostics({ path = WS .. '/none.py' })
  check('a file Neovim has no buffer for: no diagnostics (an empty list, JSON [])', #res.diagnostics == 0
    and vim.json.encode(res) == '{"diagnostics":[]}', vim.json.encode(res))
  local bad, berr = tools.diagnostics({ severity = 'fatal' })
  check('an unknown severity is an error', bad == nil and berr:find('fatal', 1, true) ~= nil, berr)

  bad, berr = tools.open_file({ path = WS .. '/nope.txt' })
  check('open_file: a missing file is an error, and no file is created', bad == nil and berr:find('no such file', 1, true)
    ~= nil and not uv.fs_stat(WS .. '/nope.txt'), berr)
  bad, berr = tools.open_file({ path = WS })
  check('open_file: a folder is an error', bad == nil and berr:find('not a file', 1, true) ~= nil, berr)
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/main.c'))
  res = tools.open_file({ path = dpath, line = 1, column = 15 })
  check('open_file: opened at line 1, character column 15 (byte 15 after é)', res and res.opened == true
    and api.nvim_get_current_buf() == dbuf and vim.deep_equal(api.nvim_win_get_cursor(0), { 1, 15 }),
    api.nvim_win_get_cursor(0))
  res = tools.open_file({ path = dpath, line = 1, column = 5, endLine = 1, endColumn = 11 })
  local mode = api.nvim_get_mode().mode
  local sel = tools.selection()
  check('open_file with an end: the range is selected (charwise, end exclusive)', mode == 'v' and sel.selection ~= vim.NIL
    and sel.selection.text == '"héllo' and sel.selection.start.column == 5 and sel.selection['end'].column == 11, { mode, sel })
  vim.cmd('normal! \27')
  res = tools.open_file({ path = dpath, line = 1, endLine = 2 })
  check('open_file with endLine only: whole lines selected', api.nvim_get_mode().mode == 'V')
  vim.cmd('normal! \27')
  sel = tools.selection()
  check('selection after leaving visual mode: the last one (the marks), linewise', sel.selection ~= vim.NIL
    and sel.selection.text == 'x = "héllo" + y\nprint(zz)' and sel.selection.start.line == 1
    and sel.selection['end'].line == 2 and sel.selection['end'].column == 10, sel)

  -- open editors: main.c modified, diag.py active, a scratch buffer left out
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/main.c'))
  vim.bo.filetype = 'c'
  api.nvim_buf_set_lines(0, 0, 0, false, { '// changed' })
  vim.cmd('enew')
  vim.bo.bufhidden = 'hide'
  vim.cmd('edit ' .. vim.fn.fnameescape(dpath))
  vim.bo.filetype = 'python'
  res = tools.open_editors()
  local by = {}
  for _, e in ipairs(res.editors) do
    by[e.path] = e
  end
  check('open_editors: main.c dirty (language c), diag.py active (python)', by[WS .. '/main.c'] and by[WS .. '/main.c'].dirty
    and not by[WS .. '/main.c'].active and by[WS .. '/main.c'].language == 'c' and by[dpath] and by[dpath].active
    and not by[dpath].dirty and by[dpath].language == 'python', res)
  local unnamed = vim.tbl_filter(function(e)
    return not e.path:find(WS, 1, true)
  end, res.editors)
  check('... buffers without a file name are left out', #unnamed == 0, unnamed)
  vim.cmd('buffer ' .. vim.fn.bufnr(WS .. '/main.c'))
  vim.cmd('silent! undo')
  vim.cmd('write')

  -- selection in visual mode, multibyte
  write(WS .. '/mb.txt', 'αβγ δεζ\nηθι\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/mb.txt'))
  api.nvim_win_set_cursor(0, { 1, 2 }) -- β
  vim.cmd('normal! v')
  api.nvim_win_set_cursor(0, { 2, 2 }) -- θ
  sel = tools.selection()
  check('selection while in visual mode: text and character columns (β..θ)', sel.selection ~= vim.NIL
    and sel.selection.text == 'βγ δεζ\nηθ' and sel.selection.start.line == 1 and sel.selection.start.column == 2
    and sel.selection['end'].line == 2 and sel.selection['end'].column == 3, sel)
  vim.cmd('normal! \27')
  write(WS .. '/fresh.txt', 'nothing selected\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/fresh.txt'))
  sel = tools.selection()
  check('selection in a buffer never selected: null', sel.selection == vim.NIL, sel)
  check('... encoded as {"selection":null}', vim.json.encode(sel) == '{"selection":null}')

  -- 5. the log file ------------------------------------------------------------------
  local LOGF = T .. '/log/qwen-companion.log'
  check('the log file is qwen-companion.log in the log folder', log.path():match('/qwen%-companion%.log$') ~= nil
    and vim.startswith(log.path(), log.dir()), log.path())
  log.set_path(LOGF)
  log.write(2, 'companion', 'two\nlines')
  log.write('INFO', 'plugins', 'started')
  log.event('companion', { type = 'log', level = 1, message = 'from the library' })
  local text = read(LOGF) or ''
  local lines = vim.split(vim.trim(text), '\n')
  check('log lines: time, level, source, message on one line', #lines == 3
    and lines[1]:match('^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ WARN  companion: two\\nlines$') ~= nil
    and lines[2]:find('INFO  plugins: started', 1, true) ~= nil
    and lines[3]:find('ERROR companion: from the library', 1, true) ~= nil, lines)
  check('log.event ignores other events', log.event('plugins', { type = 'plugin_started' }) == false)
  local max = log.MAX_BYTES
  log.MAX_BYTES = 400
  for i = 1, 30 do
    log.write('INFO', 'test', string.format('line %02d of the rotation test', i))
  end
  local cur, old = read(LOGF) or '', read(LOGF .. '.1') or ''
  check('rotation: the file stays under the bound, one older file kept', #cur <= 400 and #old > 0 and #old <= 400
    and not uv.fs_stat(LOGF .. '.2'), { #cur, #old })
  check('... the newest line is in the file, the one before the cut in .1', cur:find('line 30', 1, true) ~= nil
    and old:find('line ', 1, true) ~= nil and not cur:find('from the library', 1, true))
  log.MAX_BYTES = max
  vim.cmd('QwenLog')
  check(':QwenLog opens the log file', vim.fn.resolve(api.nvim_buf_get_name(0)) == vim.fn.resolve(LOGF))
  vim.cmd('close')

  -- 6. the health report's display ------------------------------------------------
  local report = vim.json.decode(read(ROOT .. '/tests/neovim/fixtures/health.json'))
  local hr = require('qwen_companion.health_report')
  local hl = hr.format(report)
  check('health: a heading with the library version, ABI and platform', hl[1] == 'Library 0.1.0 (ABI 1, linux-x86_64)', hl)
  check('health: one line per check in the given order, with its status', hl[2] == '  [OK] library: libqwen_companion 0.1.0'
    and hl[3]:find('^  %[WARN%] qwen: ') ~= nil and hl[4]:find('^  %[ERROR%] node: ') ~= nil, hl)
  check('health: the detail below its check, indented, line by line', hl[5] == '        searched: /usr/bin'
    and hl[6] == '        and ~/.nvm', hl)
  check('health: off shown as OFF', vim.tbl_contains(hl, '  [OFF] participant: not running'), hl)
  local rec = {}
  local function r(level)
    return function(msg, adv)
      rec[#rec + 1] = { level, msg, adv }
    end
  end
  local reporter = { start = r('start'), ok = r('ok'), info = r('info'), warn = r('warn'), error = r('error') }
  require('qwen_companion.health').check_report(reporter, report)
  local levels = vim.tbl_map(function(x)
    return x[1]
  end, rec)
  check(':checkhealth section: start, the library line, then each check by status', vim.deep_equal(levels,
    { 'start', 'info', 'ok', 'warn', 'error', 'ok', 'ok', 'ok', 'info' }), rec)
  check("... a check's detail is its advice", rec[5][3] and rec[5][3][1] == 'searched: /usr/bin\nand ~/.nvm', rec[5])
  check('health options: the terminal command and the plugins node', vim.deep_equal(hr.options({ terminal = { cmd = { '/opt/qwen', '-y' } },
    plugins = { node = '/opt/node' } }), { qwen = '/opt/qwen', node = '/opt/node' }) and hr.options({ terminal = { cmd = 'qwen --yolo' },
    plugins = {} }).qwen == nil)
  local nl = hr.neovim_lines()
  check(':QwenHealth also shows what Neovim knows (log file, terminal, editor tools)', nl[1] == 'Neovim'
    and table.concat(nl, '\n'):find('log file: ' .. LOGF, 1, true) ~= nil
    and table.concat(nl, '\n'):find('Qwen Code terminal: none', 1, true) ~= nil, nl)

  -- 7. diffs: labels and close all -----------------------------------------------------
  check('diff label: none with one CLI', qc.diff_label({ clients = 1, session = { id = 'a', label = 'CLI #1' } }) == nil)
  check('diff label: the session label with two CLIs', qc.diff_label({ clients = 2, session = { id = 'b', label = 'CLI #2' } })
    == 'CLI #2')
  check('diff label: none without session / clients (an older library)', qc.diff_label({}) == nil
    and qc.diff_label({ clients = 3 }) == nil and qc.diff_label(nil) == nil)
  check('diff status line names the CLI, % escaped', qc.diff_statusline(WS .. '/50%.c', 'CLI #2'):find('50%%.c (from CLI #2)', 1, true)
    ~= nil)

  local s1 = qc.status()
  local CLIENT = ROOT .. '/tests/c/mcp_client.py'
  local state = T .. '/mcp-state.json'
  local rc = vim.fn.system({ PY, CLIENT, 'init', '--lock', s1.lock_file, '--state', state })
  check('an MCP client connects to the companion', vim.v.shell_error == 0, rc)
  local jobs = {}
  for i, p in ipairs({ WS .. '/main.c', WS .. '/new.txt' }) do
    jobs[i] = vim.fn.jobstart({ PY, CLIENT, 'call', '--state', state, 'openDiff',
      vim.json.encode({ filePath = p, newContent = 'proposal ' .. i .. '\n' }) })
  end
  vim.fn.jobwait(jobs, TIMEOUT)
  vim.wait(TIMEOUT, function()
    return #qc.status().diffs == 2
  end, 20)
  check('two diffs open', #qc.status().diffs == 2, qc.status().diffs)
  local tabs = #api.nvim_list_tabpages()
  notes = {}
  vim.cmd('QwenCloseAllDiffs')
  check(':QwenCloseAllDiffs rejects both and closes their tabs', #qc.status().diffs == 0 and #api.nvim_list_tabpages() == tabs - 2,
    { diffs = qc.status().diffs, tabs = #api.nvim_list_tabpages() })
  check('... and says how many', notes[#notes] and notes[#notes].msg:find('2 diffs rejected', 1, true) ~= nil, notes)
  local n = qc.close_all_diffs()
  check(':QwenCloseAllDiffs with none open: 0', n == 0)

  -- the proposing CLI's label: a second CLI connects and proposes
  local function proposal_statusline(path)
    for _, d in ipairs(qc.status().diffs) do
      if d.path == path and d.buf then
        local wins = vim.fn.win_findbuf(d.buf)
        return wins[1] and vim.wo[wins[1]].statusline or nil, d.label
      end
    end
  end
  local function open_from(st, path, text)
    local job = vim.fn.jobstart({ PY, CLIENT, 'call', '--state', st, 'openDiff',
      vim.json.encode({ filePath = path, newContent = text }) })
    vim.fn.jobwait({ job }, TIMEOUT)
    vim.wait(TIMEOUT, function()
      return proposal_statusline(path) ~= nil
    end, 20)
  end
  open_from(state, WS .. '/main.c', 'one CLI\n')
  local sl, label = proposal_statusline(WS .. '/main.c')
  check('fewer than two CLIs connected: the proposal names no CLI', sl ~= nil and label == nil and not sl:find('from CLI', 1, true), sl)
  qc.close_all_diffs()
  local state2 = T .. '/mcp-state-2.json'
  rc = vim.fn.system({ PY, CLIENT, 'init', '--lock', s1.lock_file, '--state', state2 })
  check('a second MCP client connects', vim.v.shell_error == 0, rc)
  -- a CLI counts as connected while its stream is open
  local listeners = {}
  for i, st in ipairs({ state, state2 }) do
    listeners[i] = vim.fn.jobstart({ PY, CLIENT, 'listen', '--state', st, '--out', T .. '/notes-' .. i .. '.jsonl' })
  end
  vim.wait(TIMEOUT, function()
    return qc.status().clients == 2
  end, 20)
  check('... both streams open: 2 CLIs connected', qc.status().clients == 2, qc.status().clients)
  open_from(state2, WS .. '/main.c', 'two CLIs\n')
  sl, label = proposal_statusline(WS .. '/main.c')
  check('two CLIs connected: the proposal of the second names it (CLI #2) in its status line', label == 'CLI #2'
    and sl and sl:find('(from CLI #2)', 1, true) ~= nil, { sl, label })
  qc.close_all_diffs()
  for _, j in ipairs(listeners) do
    vim.fn.jobstop(j)
  end

  -- the editor tools through the registered bridge, as Qwen Code calls them
  qc.stop({ silent = true })
  qc.setup({ plugins = { enabled = true, dir = T .. '/plugins' } })
  ok, err = qc.start()
  check('the companion starts with the plugin host', ok, err)
  local mcp = qc.status().plugins.mcp or {}
  check('the plugin MCP server lists the four editor tools', vim.tbl_contains(mcp.tools or {}, 'editor-diagnostics')
    and vim.tbl_contains(mcp.tools or {}, 'editor-open-file') and vim.tbl_contains(mcp.tools or {}, 'editor-open-editors')
    and vim.tbl_contains(mcp.tools or {}, 'editor-selection'), mcp.tools)
  local function call_tool(tool, args)
    local out = {}
    local job = vim.fn.jobstart({ PY, ROOT .. '/tests/neovim/bridge_client.py', os.getenv('QWEN_HOME') .. '/settings.json', WS,
      tool, vim.json.encode(args), '--timeout', tostring(TIMEOUT / 1000) }, {
      cwd = WS,
      stdout_buffered = true,
      on_stdout = function(_, data)
        out = data
      end,
    })
    vim.wait(TIMEOUT, function()
      return vim.fn.jobwait({ job }, 0)[1] ~= -1
    end, 20)
    local okj, v = pcall(vim.json.decode, table.concat(out, '\n'))
    if not okj or type(v) ~= 'table' or type(v.result) ~= 'table' then
      return nil, table.concat(out, '\n')
    end
    local content = v.result.content or {}
    return v.result, content[1] and content[1].text or ''
  end
  local r1, t1 = call_tool('editor-diagnostics', { path = dpath })
  check('editor-diagnostics through the bridge: Neovim\'s diagnostics, character columns', r1 and not r1.isError
    and t1:find('undefined name y', 1, true) ~= nil and t1:find('"column":15', 1, true) ~= nil, { r1, t1 })
  local r2, t2 = call_tool('editor-open-file', { path = WS .. '/nope.txt' })
  check('editor-open-file of a missing file: an error result with the reason', r2 and r2.isError
    and t2:find('no such file', 1, true) ~= nil, { r2, t2 })
  local r3, t3 = call_tool('editor-open-editors', vim.empty_dict())
  check('editor-open-editors through the bridge: the open files', r3 and not r3.isError
    and t3:find('main.c', 1, true) ~= nil, { r3, t3 })
  -- the library's real health report, and :QwenHealth
  local rep, rerr = hr.library_report()
  local ids = rep and vim.tbl_map(function(c)
    return c.id
  end, rep.checks) or {}
  check("qc_health_json: the library's version and the eight checks in order", rep
    and rep.library.version == require('ffi').string(qc.handles().lib.qc_version())
    and vim.deep_equal(ids, { 'library', 'qwen', 'gemini', 'node', 'lock_file', 'clis', 'plugin_mcp', 'participant' }),
    { rep, rerr })
  local statuses_ok = rep ~= nil
  for _, c in ipairs(rep and rep.checks or {}) do
    statuses_ok = statuses_ok and vim.tbl_contains({ 'ok', 'warn', 'error', 'off' }, c.status)
      and type(c.summary) == 'string' and c.summary ~= ''
  end
  check('... each with a status and a summary; the lock file and the plugin MCP server found', statuses_ok
    and rep.checks[5].status == 'ok' and rep.checks[7].status ~= 'error', rep)
  check("... gemini off: cli = 'qwen' does not serve Gemini CLI", rep and rep.checks[3].status == 'off', rep)
  vim.cmd('QwenHealth')
  local hbuf = api.nvim_buf_get_lines(0, 0, -1, false)
  local marks = vim.tbl_filter(function(l)
    return l:match('^  %[%u+%] ') ~= nil
  end, hbuf)
  check(':QwenHealth shows the report (a line per check) and the Neovim section', hbuf[1]:find('^Library ') ~= nil
    and #marks == 8 and vim.tbl_contains(hbuf, 'Neovim')
    and table.concat(hbuf, '\n'):find('editor tools offered: editor_diagnostics', 1, true) ~= nil, hbuf)
  vim.cmd('close')

  local r4, t4 = call_tool('editor-selection', vim.empty_dict())
  check('editor-selection through the bridge: an answer', r4 and not r4.isError and t4:find('selection', 1, true) ~= nil,
    { r4, t4 })
  qc.stop()
  check("the plugin's messages to the user are logged too (rejected …, stopped)", (read(LOGF) or ''):find('INFO  neovim: stopped', 1, true)
    ~= nil and (read(LOGF) or ''):find('neovim: rejected ', 1, true) ~= nil, read(LOGF))
  local cn, cerr = qc.close_all_diffs()
  check('close_all_diffs when stopped: not running', cn == nil and cerr == 'not running')
end

C.run_guarded(run, 'the test ran to its end')
C.finish(T .. '/nv-prompt.json')
