-- Headless test of the plugin UI (:QwenPlugin, qwen_companion.plugins_ui)
-- and the cross-session participant (qwen_companion.participant) against
-- the real library. Run by tests/neovim/run.sh:
--
--   nvim --headless -u NONE --cmd 'set rtp^=examples/neovim' -c 'luafile tests/neovim/test_extras.lua'
--
-- Env: QCNV_TMP (results: $QCNV_TMP/nv-extras.json with every check),
-- QCNV_ROOT (the repository), QCNV_WS (the cwd), QCNV_TIMEOUT (seconds),
-- QWEN_COMPANION_LIB. vim.ui.select / vim.ui.input / vim.notify are
-- replaced by scripted stand-ins; the core (companion + plugin host) is
-- started, so the plugin UI and the participant run through its seam
-- (plugin_host(), on_start / on_stop); a second participant ("qwen-peer",
-- pull mode too) plays the Qwen session.

local ffi = require('ffi')
local TMP = assert(os.getenv('QCNV_TMP'))
local ROOT = assert(os.getenv('QCNV_ROOT'))
local WS = assert(os.getenv('QCNV_WS'))
local TIMEOUT = (tonumber(os.getenv('QCNV_TIMEOUT')) or 30) * 1000

vim.cmd('filetype on')
vim.cmd('runtime plugin/qwen_companion.lua')

local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
local check = C.check
local function eq(name, got, want)
  check(name, vim.deep_equal(got, want), { got = got, want = want })
end
local function write_results()
  C.write(TMP .. '/nv-extras.json')
end

-- Scripted UI -------------------------------------------------------------
local notes = {}
vim.notify = function(msg, level)
  notes[#notes + 1] = { msg = msg, level = level or vim.log.levels.INFO }
end
local function noted(pattern, plain)
  for _, n in ipairs(notes) do
    if n.msg:find(pattern, 1, plain ~= false) then
      return n
    end
  end
end
local selects, inputs, prompts = {}, {}, {}
vim.ui.select = function(items, opts, on_choice)
  local chooser = table.remove(selects, 1)
  local labels = {}
  for i, it in ipairs(items) do
    labels[i] = opts.format_item and opts.format_item(it) or tostring(it)
  end
  prompts[#prompts + 1] = { prompt = opts.prompt, labels = labels }
  if not chooser then
    return on_choice(nil, nil)
  end
  for i, l in ipairs(labels) do
    if l:find(chooser, 1, true) then
      return on_choice(items[i], i)
    end
  end
  on_choice(nil, nil)
end
vim.ui.input = function(opts, on_confirm)
  prompts[#prompts + 1] = { prompt = opts.prompt, default = opts.default }
  on_confirm(table.remove(inputs, 1))
end
local function last_prompt()
  return prompts[#prompts] or {}
end

local function wait(ms, cond)
  return vim.wait(ms or TIMEOUT, cond, 20)
end

local read = C.read

local function buf_lines(b)
  return vim.api.nvim_buf_get_lines(b, 0, -1, false)
end
local function contains(lines, text)
  for _, l in ipairs(lines or {}) do
    if l:find(text, 1, true) then
      return true
    end
  end
  return false
end

-- Pure logic --------------------------------------------------------------
local function pure()
  local pm = require('qwen_companion.plugins_model')
  local sm = require('qwen_companion.sessions_model')

  eq('keybinding mod+shift+d → <C-S-d> (Linux)', pm.keybinding_lhs('mod+shift+d', 'Linux'), '<C-S-d>')
  eq('keybinding mod+shift+d → <D-S-d> (macOS)', pm.keybinding_lhs('mod+shift+d', 'OSX'), '<D-S-d>')
  eq('keybinding label Ctrl+Shift+D', pm.keybinding_label('mod+shift+d', 'Linux'), 'Ctrl+Shift+D')
  eq('keybinding ctrl+alt+f5 → <C-M-F5>', pm.keybinding_lhs('ctrl+alt+f5', 'Linux'), '<C-M-F5>')
  local bad, err = pm.keybinding_lhs('mod+hyper+d', 'Linux')
  check('a bad keybinding is refused with a message', bad == nil and tostring(err):find('hyper', 1, true), err)

  local opts = pm.option_items({ { value = 'auto', label = 'Auto' }, { value = 'fast', label = 'Fast' }, { value = 'accurate', label = 'Accurate' } }, nil)
  eq('options: Auto first, current marked (Auto in effect)', vim.tbl_map(function(o)
    return o.label
  end, opts), { 'Auto  (current)', 'Fast', 'Accurate' })
  opts = pm.option_items({ { value = 'auto', label = 'Auto' }, { value = 'fast', label = 'Fast' } }, 'fast')
  eq('options: the user value marked, Auto not', { opts[1].label, opts[2].label, opts[1].auto }, { 'Auto', 'Fast  (current)', true })

  eq('number input "5" → 5', pm.parse_config_input('number', ' 5 '), '5')
  check('number input "abc" refused', pm.parse_config_input('number', 'abc') == nil)
  eq('boolean input "yes" → true', pm.parse_config_input('boolean', 'yes'), 'true')
  check('boolean input "maybe" refused', pm.parse_config_input('boolean', 'maybe') == nil)
  eq('empty number input resets (null)', pm.parse_config_input('number', ''), 'null')
  eq('string input kept as typed (JSON string)', pm.parse_config_input('string', ' a "b" '), '" a \\"b\\" "')

  local cl = pm.checklist_lines('T', { content = {}, details = { todos = {
    { id = '1', content = 'one', status = 'completed' },
    { id = '2', content = 'two', status = 'in_progress' },
    { id = '3', content = 'three', status = 'pending' },
  } } })
  eq('checklist lines with status marks', cl, { 'T', '[x] one', '[~] two', '[ ] three', '1 of 3 done' })
  eq('checklist without todos shows the text', pm.checklist_lines('T', { content = { { type = 'text', text = 'a\nb' } } }), { 'T', 'a', 'b' })
  eq('file card from details.filePath', pm.file_card({ details = { filePath = '/x/n.md' } }), { path = '/x/n.md', name = 'n.md' })
  check('no file card for a relative path', pm.file_card({ details = { filePath = 'n.md' } }) == nil)
  eq('MIME by extension', { pm.mime_of('/a/B.MD'), pm.mime_of('x.pdf'), pm.mime_of('noext') }, { 'text/markdown', 'application/pdf', nil })
  local line = pm.plugin_line({ id = 'a.b', version = '1.0.0', enabled = false, tools = {}, lastError = { message = 'crashed 3 times', at = 1 } })
  check('manager line: off, last error', line:find('[off]', 1, true) and line:find('last error: crashed 3 times', 1, true), line)
  eq('browser fallback argv', pm.browser_command('http://x/', nil, 'Linux'), { 'xdg-open', 'http://x/' })
  eq('browser argv list + url', pm.browser_command('http://x/', { 'firefox', '--new-tab' }, 'Linux'), { 'firefox', '--new-tab', 'http://x/' })

  local full = vim.json.decode(read(ROOT .. '/tests/plugins/fixtures/full/manifest.json'))
  local acts = pm.actions({ id = 'com.example.full', name = 'Full Example', manifest = full }, 'Linux', false)
  eq('actions: command (with its key) and menu; session action hidden', vim.tbl_map(function(a)
    return a.label
  end, acts), {
    'Full Example: Do one thing to the current project  (Ctrl+Shift+D)',
    'Full Example: Do one thing to this session  [menu]',
  })
  acts = pm.actions({ id = 'com.example.full', name = 'Full Example', manifest = full }, 'Linux', true)
  eq('actions: the session action when visible', acts[3] and acts[3].source, 'session')
  local items = pm.config_items(full, { limit = 5 })
  eq('config items: value or default', vim.tbl_map(function(i)
    return i.label
  end, items), {
    'Mode (select): auto  [default]',
    'Verbose output (boolean): false  [default]',
    'Prefix (string): ""  [default]',
    'Max items (number): 5',
  })

  eq('participant name from the cwd', sm.participant_name('/home/me/My Project!'), 'nvim-my-project')
  eq('participant name: / gives nvim', sm.participant_name('/'), 'nvim')
  check('participant name capped at 40', #sm.participant_name('/x/' .. string.rep('a', 80)) == 40)
  eq('sanitised configured name', sm.sanitise_name('Work Laptop (nvim)'), 'work-laptop-nvim')
  eq('inbox policies', { sm.policy('hold') }, { true, 'hold' })
  eq('inbox policy default = library mode parity (nil)', { sm.policy('default') }, { true, nil })
  check('unknown inbox policy refused', not sm.policy('sometimes'))
  eq('path:line refs (no times, no URLs)', sm.file_refs('see src/main.rs:12 and lib/x.lua:3:4, at 10:30 via http://h:80 or src/main.rs:12'), {
    { path = 'src/main.rs', line = 12 },
    { path = 'lib/x.lua', line = 3, col = 4 },
  })
  eq('path:line under the cursor', sm.file_ref_at('  open a.c:1 or b/c.h:22 now', 18), { path = 'b/c.h', line = 22 })
  eq('Windows refs keep their drive', sm.file_refs('at C:\\w\\src\\a.lua:4:2 and src\\b.lua:9, not http://h:80'), {
    { path = 'C:\\w\\src\\a.lua', line = 4, col = 2 }, { path = 'src\\b.lua', line = 9 } })
  eq('a Windows ref under the cursor (on its drive letter too)', { sm.file_ref_at('x C:\\a\\b.c:7 y', 3), sm.file_ref_at('x C:\\a\\b.c:7 y', 9) },
    { { path = 'C:\\a\\b.c', line = 7 }, { path = 'C:\\a\\b.c', line = 7 } })
  eq('quickfix as text', sm.quickfix_text(':make', {
    { filename = 'main.c', lnum = 3, col = 5, type = 'E', text = 'boom' },
    { text = 'make: *** Error 1' },
  }), ':make\nmain.c:3:5: [E] boom\nmake: *** Error 1')
  eq('selection with path:line context', sm.with_context('a\nb', 'src/x.c', 4, 5, 'c'), 'src/x.c:4-5\n```c\na\nb\n```')
  local rt, warn = sm.receipt_text({ address = 'qwen [abc123]', status = 'refused', reason = 'nope' })
  check('receipt text: refused with its reason, as a warning', warn and rt == 'message to qwen [abc123]: refused (nope)', rt)
  local si = sm.session_items({
    { sessionId = 'me', ref = 'aaaaaa', name = 'nvim-ws', cwd = '/w', kind = 'external', startedAt = 1.7e12 },
    { sessionId = 's2', ref = 'bbbbbb', name = 'fix-bug', cwd = '/home/u/p', startedAt = 1.7e12, reachable = true },
    { sessionId = 's3', ref = 'cccccc', name = '', cwd = '/t', startedAt = 1.7e12, reachable = false },
  }, { 'me' }, 1.7e12 + 125000, '/home/u')
  eq('session items: others only, addresses', vim.tbl_map(function(i)
    return i.address
  end, si), { 'fix-bug [bbbbbb]', '[cccccc]' })
  eq('session label: name, ref, cwd, kind, age', si[1].label, 'fix-bug [bbbbbb]  ~/p  qwen  2m')
  check('unreachable session marked', si[2].label:find('(no inbox)', 1, true), si[2].label)
  eq('ISO startedAt to ms', sm.started_ms('1970-01-02T00:00:01.5Z'), 86401500)
end

-- The plugin host -----------------------------------------------------------
local ext = require('qwen_companion.capi_ext')
local capi = require('qwen_companion.capi')
local lib = assert(ext.load(capi.library_path(nil)))
local core = require('qwen_companion')
local ui = require('qwen_companion.plugins_ui')
local part = require('qwen_companion.participant')

local function plugin_pids(dir)
  local out = {}
  for _, env in ipairs(vim.fn.glob('/proc/[0-9]*/environ', true, true)) do
    local s = read(env)
    if s and s:find('PLUGIN_DATA_DIR=' .. dir, 1, true) then
      out[#out + 1] = env:match('/proc/(%d+)/')
    end
  end
  return out
end

local function plugins()
  -- The core starts the companion and, next to it, the plugin host (the
  -- seam: plugin_host(), on_start / on_stop).
  core.setup({ plugins = { dir = TMP .. '/x-plugins', mcp = false }, register_mcp = false, lock_dir = TMP .. '/locks' })
  local sok, serr = core.start()
  check('the core starts (companion + plugin host)', sok, serr)
  local h = core.plugin_host()
  check('the core gives its plugin host', type(h) == 'table' and h.h ~= nil, h)
  check('on_start started the participant (nvim-ws)', part.status() and part.status().name == 'nvim-ws', part.status())
  check('the plugin UI joined the host\'s events', ui._state.attached == h)

  for _, src in ipairs({ ROOT .. '/examples/plugins/hello', ROOT .. '/examples/plugins/todo-quadrant', ROOT .. '/tests/plugins/fixtures/full' }) do
    local res, err = ui.install(src)
    check('install ' .. vim.fn.fnamemodify(src, ':t'), res and res.id, err)
  end
  local res, err = ui.install(TMP .. '/no-such-plugin')
  check('install of a missing folder fails with a message', res == nil and err and err ~= '', err)

  local list = ui.list()
  eq('list: three plugins, sorted', vim.tbl_map(function(p)
    return p.id
  end, list), { 'com.example.full', 'com.example.hello', 'local.todo-quadrant' })
  check('list: manifests read', list[1].manifest.commands and #list[1].manifest.commands == 1, list[1].manifest)

  local b = ui.list_command()
  local lines = buf_lines(b)
  check('plugin manager buffer lists every plugin', contains(lines, '[on]  com.example.hello 1.0.0') and contains(lines, 'local.todo-quadrant 1.2.0'), lines)
  vim.api.nvim_win_set_cursor(0, { 3, 0 }) -- com.example.hello
  vim.cmd('normal d')
  lines = buf_lines(ui._state.buffers['Qwen plugins'])
  check('manager: d disables the plugin under the cursor', contains(lines, '[off] com.example.hello'), lines)
  vim.api.nvim_win_set_cursor(0, { 3, 0 })
  vim.cmd('normal e')
  lines = buf_lines(ui._state.buffers['Qwen plugins'])
  check('manager: e enables it again', contains(lines, '[on]  com.example.hello'), lines)

  -- hello, queued call
  local got
  ui.call_async('com.example.hello', 'say_hello', { name = 'Neovim' }, function(r, e)
    got = r or { error = e }
  end)
  check('hello say_hello: the result arrives (call_done)', wait(TIMEOUT, function()
    return got ~= nil
  end))
  eq('hello say_hello text', got and got.content and got.content[1].text, 'Hello, Neovim!')
  got = nil
  ui.call_async('com.example.hello', 'say_hello', {}, function(r, e, detail)
    got = { r = r, e = e, kind = detail and detail.kind }
  end)
  wait(TIMEOUT, function()
    return got ~= nil
  end)
  eq('a schema failure reaches the caller as kind "schema"', got and got.kind, 'schema')

  -- commands (checklist), session action gated by visibleTool
  local function run_and_wait(id, choose)
    selects[#selects + 1] = choose
    local shown
    local before = ui._state.results
    ui.run_command(id)
    wait(TIMEOUT, function()
      return ui._state.results > before
    end)
    shown = vim.api.nvim_get_current_buf()
    return buf_lines(shown)
  end
  lines = run_and_wait('com.example.full', 'Do one thing to the current project')
  eq('checklist result rendered with status marks', { lines[2], lines[3], lines[4], lines[5] },
    { '[x] Inspect ' .. WS, '[~] Apply mode auto', '[ ] Report', '1 of 3 done' })
  local labels = last_prompt().labels or {}
  check('session action hidden outside a git repo (visibleTool)', not contains(labels, '[session]'), labels)
  vim.fn.mkdir(WS .. '/.git', 'p')
  ui.run_command('com.example.full') -- no choice: only look at the menu
  labels = last_prompt().labels or {}
  check('session action shown inside a git repo', contains(labels, '[session]') and contains(labels, '(Ctrl+Shift+D)'), labels)

  -- configuration
  selects[#selects + 1] = 'Fast'
  ui.config_command('com.example.full', 'mode')
  eq('select options offered: Auto first, then optionsTool', last_prompt().labels, { 'Auto  (current)', 'Fast', 'Accurate' })
  local state = vim.json.decode(read(TMP .. '/x-plugins/state.json'))
  eq('choosing Fast stores "fast"', state.plugins['com.example.full'].config.mode, 'fast')
  inputs[#inputs + 1] = 'abc'
  ui.config_command('com.example.full', 'limit')
  check('number "abc" refused with a message, nothing stored', noted('limit not changed') and read(TMP .. '/x-plugins/state.json'):find('limit') == nil)
  inputs[#inputs + 1] = '2'
  ui.config_command('com.example.full', 'limit')
  inputs[#inputs + 1] = 'yes'
  ui.config_command('com.example.full', 'verbose')
  state = vim.json.decode(read(TMP .. '/x-plugins/state.json'))
  eq('number and boolean stored', { state.plugins['com.example.full'].config.limit, state.plugins['com.example.full'].config.verbose }, { 2, true })
  lines = run_and_wait('com.example.full', 'Do one thing to the current project')
  eq('the call sees the configuration (mode fast, limit 2)', { lines[2], lines[3], lines[4] }, { '[x] Inspect ' .. WS, '[~] Apply mode fast', '1 of 2 done' })
  selects[#selects + 1] = 'Auto'
  ui.config_command('com.example.full', 'mode')
  state = vim.json.decode(read(TMP .. '/x-plugins/state.json'))
  check('Auto removes the value (default applies)', state.plugins['com.example.full'].config.mode == nil, state)

  -- file card
  got = nil
  ui.call_async('com.example.full', 'write_note', { text = '# note\n', fileName = 'n.md' }, function(r)
    got = r
  end)
  wait(TIMEOUT, function()
    return got ~= nil
  end)
  local p = ui.plugin('com.example.full')
  ui.show_result(p, 'write_note', got)
  eq('a file card opens the file', vim.api.nvim_buf_get_name(0), TMP .. '/x-plugins/data/com.example.full/n.md')

  -- document parser
  local f = io.open(WS .. '/doc.md', 'w')
  f:write('# Title\nbody\n')
  f:close()
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/doc.md'))
  b = ui.parse_command()
  eq('parse: the current file by MIME through the parser', b and buf_lines(b), { '# Title', 'body', '' })

  -- the view server: views and panels in the browser (a stub "browser"
  -- writes the URL it gets), pages served, colour scheme from 'background'
  local opened = TMP .. '/opened-url'
  ui.config.browser = { 'sh', '-c', 'printf %s "$1" > "$0"', opened }
  local function open_with(cmd)
    os.remove(opened)
    vim.cmd(cmd)
    wait(5000, function()
      return read(opened) ~= nil
    end)
    return read(opened)
  end
  local function http_status(url) -- python3 is already a requirement of run.sh
    return vim.trim(vim.fn.system({ os.getenv('PYTHON') or 'python3', '-c', [[
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
]], url }))
  end
  local views = ui.views() or {}
  local vlist = vim.tbl_map(function(v)
    return v.plugin .. '/' .. v.id
  end, views.views or {})
  eq('the view server serves the views of the enabled plugins', vlist, { 'com.example.full/board', 'local.todo-quadrant/quadrant' })
  eq('... and the panels', vim.tbl_map(function(v)
    return v.plugin .. ': ' .. v.title
  end, views.panels or {}), { 'com.example.full: Example Panel' })
  local url = open_with('QwenPlugin view local.todo-quadrant quadrant')
  check(':QwenPlugin view ID VIEW opens the view URL in the browser', url and url:find('^http://127%.0%.0%.1:%d+/'), url)
  eq('... a page the server serves (200)', url and http_status(url), '200')
  url = open_with('QwenPlugin panel com.example.full')
  check(':QwenPlugin panel ID opens the panel URL', url and url:find('^http://127%.0%.0%.1:%d+/'), url)
  eq('... served too (200)', url and http_status(url), '200')
  local forged = url and url:gsub('/v/[^/]+/', '/v/forged/')
  check('a wrong capability is refused (' .. tostring(forged and http_status(forged)) .. ')', forged and forged ~= url and http_status(forged):match('^4'), forged)
  vim.cmd('set background=dark')
  open_with('QwenPlugin view local.todo-quadrant quadrant')
  eq("'background' dark, then a view opened → the pages' colour scheme is dark", (ui.views() or {}).colorScheme, 'dark')
  vim.cmd('set background=light')
  vim.cmd('doautocmd OptionSet background') -- what :set sends after VimEnter (not during this startup script)
  eq("OptionSet 'background' light → the open pages get light", (ui.views() or {}).colorScheme, 'light')

  -- notifications during a queued call (the plugin waits for them); with
  -- the view server the request names its view
  got = nil
  local t0 = vim.loop.hrtime()
  ui.call_async('local.todo-quadrant', 'manage_todo_quadrant', { action = 'remind_now' }, function(r, e)
    got = r or { error = e }
  end)
  wait(TIMEOUT, function()
    return got ~= nil
  end)
  local ms = (vim.loop.hrtime() - t0) / 1e6
  check(string.format('a plugin waiting for show_notification completes (%.0f ms; the request timeout is 30 s)', ms), got and got.content and ms < 10000, got)
  check('its notification is shown (vim.notify) with how to open its view', noted('for today', true) and noted(':QwenPlugin view opens Todo Quadrant'), notes)
  local last = ui._state.last_view
  check('... the notification carries the view URL', last and last.id == 'quadrant' and last.url:find('^http://127%.0%.0%.1:%d+/'), last)
  url = open_with('QwenPlugin view')
  eq(':QwenPlugin view (no argument) opens the notified view', url, last and last.url)
  eq('... served (200)', url and http_status(url), '200')
  local answer = ui.notification({ plugin = 'p', params = { title = 'T' } })
  eq('show_notification is answered {shown = true}', answer, { shown = true })
  check('an empty notification is refused', ui.notification({ plugin = 'p', params = {} }) == nil)
  ui.handle_event({ type = 'plugin_disabled', plugin = 'com.example.x', reason = 'exited 3 times in 60 s' })
  check('a crash-loop disable is reported with how to re-enable', noted('plugin com.example.x was disabled: exited 3 times in 60 s (:QwenPlugin enable com.example.x)'), notes)

  -- keybindings
  local mapped = ui.apply_keybindings()
  check('manifest keybinding mapped: <C-S-d> → do_something', mapped['<C-S-d>'] and mapped['<C-S-d>'].tool == 'do_something', mapped)
  check('... as a normal-mode mapping', vim.fn.maparg('<C-S-d>', 'n') ~= '')

  -- completion
  local comp = ui.complete('', 'QwenPlugin ')
  eq('completion: subcommands', comp, { 'list', 'install', 'uninstall', 'enable', 'disable', 'run', 'config', 'view', 'panel', 'parse' })
  eq('completion: plugin ids', ui.complete('com', 'QwenPlugin run com'), { 'com.example.full', 'com.example.hello' })
  eq('completion: tools of run', ui.complete('', 'QwenPlugin run com.example.full '), { 'do_something' })
  eq('completion: views', ui.complete('', 'QwenPlugin view local.todo-quadrant '), { 'quadrant' })
  eq('completion: config keys', ui.complete('l', 'QwenPlugin config com.example.full l'), { 'limit' })
  eq('completion: parser MIME types', ui.complete('', 'QwenPlugin parse '), { 'text/markdown' })

  -- enable / disable / uninstall through the command
  vim.cmd('QwenPlugin disable com.example.full')
  list = ui.list()
  check(':QwenPlugin disable → [off], its keybinding unmapped', list[1].enabled == false and vim.fn.maparg('<C-S-d>', 'n') == '', list[1])
  got = nil
  ui.call_async('com.example.full', 'do_something', {}, function(r, e, d)
    got = { d = d }
  end)
  wait(TIMEOUT, function()
    return got ~= nil
  end)
  eq('a disabled plugin is refused (kind disabled)', got and got.d and got.d.kind, 'disabled')
  vim.cmd('QwenPlugin enable com.example.full')
  check(':QwenPlugin enable → on again', ui.list()[1].enabled == true)
  vim.cmd('QwenPlugin uninstall com.example.hello')
  eq(':QwenPlugin uninstall removes it', vim.tbl_map(function(x)
    return x.id
  end, ui.list()), { 'com.example.full', 'local.todo-quadrant' })
  vim.cmd('QwenPlugin frobnicate')
  check('an unknown subcommand is an error message', noted('unknown :QwenPlugin subcommand frobnicate'))

end

-- The participant -----------------------------------------------------------
local peer = {}

local function peer_start()
  local out = ffi.new('qc_participant *[1]')
  assert(capi.call(lib, 'qc_participant_new', vim.json.encode({ inboundPolicy = 'accept' }), out))
  peer.p = out[0]
  local fd = ffi.new('int32_t[1]')
  assert(capi.call(lib, 'qc_participant_enable_events', peer.p, fd))
  peer.fd = tonumber(fd[0])
  peer.session = assert(ext.out_json(lib, 'qc_participant_register', peer.p, vim.json.encode({ name = 'qwen-peer', cwd = WS })))
  peer.events = {}
end
local function peer_pull()
  while true do
    local s = ext.out_string(lib, 'qc_participant_next_event', peer.p)
    if not s then
      return
    end
    peer.events[#peer.events + 1] = vim.json.decode(s)
  end
end
local function peer_message(pattern)
  local found
  wait(TIMEOUT, function()
    peer_pull()
    for _, e in ipairs(peer.events) do
      if e.type == 'message' and (e.content or ''):find(pattern, 1, true) then
        found = e
        return true
      end
    end
    return false
  end)
  return found
end
local function peer_send(text)
  return ext.out_json(lib, 'qc_participant_send', peer.p, vim.json.encode({ to = 'nvim-ws', content = text }))
end
local function peer_final(msg_id)
  local st = ext.out_json(lib, 'qc_participant_wait', peer.p, msg_id, 10000, 1)
  return st and st.state
end

local function sessions()
  local ok, err = part.start() -- already running: on_start
  check('participant runs', ok and part.status(), err)
  local st = part.status()
  eq('registered as nvim-<cwd basename>, kind external', { st.name, st.session.kind }, { 'nvim-ws', 'external' })
  check('its registry record exists', vim.loop.fs_stat(st.session.recordPath) ~= nil, st.session)
  local env = part.child_env()
  check('terminal env for child sessions: socket and token', env.QWEN_CODE_MESSAGING_SOCKET == st.session.ipcPath and #(env.QWEN_CODE_MESSAGING_TOKEN or '') >= 32, st.session)
  peer_start()

  local items = part.sessions()
  local addrs = vim.tbl_map(function(i)
    return i.address
  end, items or {})
  eq('sessions: the peer, not ourselves', addrs, { 'qwen-peer [' .. peer.session.ref .. ']' })

  -- :QwenSessions → pick → type → send; receipt shown
  selects[#selects + 1] = 'qwen-peer'
  inputs[#inputs + 1] = 'hello from nvim'
  vim.cmd('QwenSessions')
  local m = peer_message('hello from nvim')
  check(':QwenSessions → the peer receives the typed message', m ~= nil, peer.events)
  check('... with our name', m and m.fromName == 'nvim-ws', m)
  check('the receipt is shown: delivered', wait(TIMEOUT, function()
    return noted('message to qwen-peer: delivered') ~= nil
  end), vim.tbl_filter(function(n)
    return n.msg:find('message to', 1, true) ~= nil
  end, notes))

  -- :QwenSend! on a range: path:line context
  vim.cmd('edit ' .. vim.fn.fnameescape(WS .. '/main.c'))
  selects[#selects + 1] = 'qwen-peer'
  vim.cmd('1,2QwenSend!')
  m = peer_message('main.c:1-2')
  check(':1,2QwenSend! sends the lines with path:line context', m and m.content == 'main.c:1-2\n```c\n#include <stdio.h>\nint main(void) {\n```', m)
  -- the same text again is refused by the library before sending
  selects[#selects + 1] = 'qwen-peer'
  vim.cmd('1,2QwenSend!')
  check('a repeat is refused before sending, with the library\'s reason', noted('that exact message went to that inbox'), notes)
  -- unknown address
  part.send_and_report('nobody-here', 'x')
  check('an unknown address is reported', noted('not sent to nobody-here'), notes)

  -- :QwenSendQuickfix
  vim.fn.setqflist({}, 'r', { title = ':make', items = { { filename = WS .. '/main.c', lnum = 3, col = 5, type = 'E', text = 'boom' } } })
  selects[#selects + 1] = 'qwen-peer'
  vim.cmd('QwenSendQuickfix')
  m = peer_message('boom')
  eq(':QwenSendQuickfix sends the quickfix list as text', m and m.content, ':make\nmain.c:3:5: [E] boom')

  -- receive (policy accept), messages buffer, gf
  assert(part.set_policy('accept'))
  local sent = peer_send('please look at main.c:3 <now>')
  check('peer → editor sent', sent ~= nil)
  check('the message is shown (vim.notify) with its sender', wait(TIMEOUT, function()
    return noted('message from qwen-peer') ~= nil
  end), notes)
  local b = part.messages_command()
  local lines = buf_lines(b)
  check('the Qwen messages buffer shows sender, origin and the neutralised text', contains(lines, 'from qwen-peer  (peer)') and contains(lines, 'please look at main.c:3') and not contains(lines, '<now>'), lines)
  for i, l in ipairs(lines) do
    if l:find('main.c:3', 1, true) then
      vim.api.nvim_win_set_cursor(0, { i, (l:find('main.c', 1, true)) })
    end
  end
  vim.cmd('normal gf')
  eq('gf in the messages buffer opens path:line', { vim.api.nvim_buf_get_name(0), vim.api.nvim_win_get_cursor(0)[1] }, { WS .. '/main.c', 3 })
  eq('peer\'s receipt: delivered', peer_final(sent.msgId), 'delivered')

  -- the session id rotates (as the library may do): the participant follows
  local old_id = part.status().session.sessionId
  local rot = ext.out_json(lib, 'qc_participant_rotate_session_id', part._state().p, old_id, nil)
  check('session id rotated', rot and rot.sessionId ~= old_id, rot)
  check('... the participant follows it (status, terminal env, policy)', part.status().session.sessionId == rot.sessionId
    and part.child_env().QWEN_CODE_MESSAGING_SOCKET ~= nil and part.set_policy('accept'), part.status())

  -- hold → release
  assert(part.set_policy('hold'))
  sent = peer_send('held one')
  check('a held message is announced', wait(TIMEOUT, function()
    return #part.status().held == 1
  end) and noted('held for review: :QwenHeld'), part.status())
  selects[#selects + 1] = 'held one'
  selects[#selects + 1] = 'release'
  vim.cmd('QwenHeld')
  eq('released: the peer sees delivered', peer_final(sent.msgId), 'delivered')
  check('... and the message reaches the messages buffer', wait(TIMEOUT, function()
    return contains(buf_lines(b), 'held one')
  end))
  -- hold → deny
  sent = peer_send('deny me')
  wait(TIMEOUT, function()
    return #part.status().held == 1
  end)
  selects[#selects + 1] = 'deny me'
  selects[#selects + 1] = 'deny'
  vim.cmd('QwenHeld')
  eq('denied: the peer sees denied', peer_final(sent.msgId), 'denied')
  check('... and it never reaches the buffer', not contains(buf_lines(b), 'deny me'))
  wait(2000, function()
    return #part.status().held == 0
  end)
  eq('nothing held any more', #part.held(), 0)

  -- refuse (ours), and a refusal by the recipient shown to us
  assert(part.set_policy('refuse'))
  sent = peer_send('refused one')
  eq('policy refuse: the peer sees refused', peer_final(sent.msgId), 'refused')
  local settings = vim.json.decode(assert(ext.out_string(lib, 'qc_participant_inbound_settings_json', peer.p, peer.session.sessionId)))
  settings.policy = 'refuse'
  assert(capi.call(lib, 'qc_participant_update_inbound', peer.p, peer.session.sessionId, vim.json.encode(settings)))
  part.send_and_report('qwen-peer', 'will be refused')
  check('the recipient\'s refusal is shown', wait(TIMEOUT, function()
    return noted('message to qwen-peer: refused') ~= nil
  end), notes)
  check('... as a warning', (noted('message to qwen-peer: refused') or {}).level == vim.log.levels.WARN)
  check('setup refuses an unknown inbox_policy', not pcall(part.setup, { inbox_policy = 'sometimes' }))
  local bad = { part.set_policy('sometimes') }
  check('an unknown inbox policy is refused', bad[1] == nil and tostring(bad[2]):find('inbox_policy', 1, true), bad)

  -- unregister: the core's stop stops the participant (on_stop)
  local record = part.status().session.recordPath
  core.stop({ silent = true })
  check('the core\'s stop unregisters the participant: the record is gone', part.status() == nil and vim.loop.fs_stat(record) == nil)
  eq('no plugin process left after the host is freed', plugin_pids(TMP .. '/x-plugins/data/'), {})
  local left = ext.out_json(lib, 'qc_participant_list_json', peer.p)
  check('... and the peer no longer lists nvim-ws', not vim.tbl_contains(vim.tbl_map(function(r)
    return r.name
  end, left), 'nvim-ws'), left)
  lib.qc_participant_free(peer.p)
  -- registered again: VimLeavePre (the :qa! below) unregisters it
  part.config.name = 'Leave Test'
  check('started again under a configured name', part.start() and part.status().name == 'leave-test')
  local f = io.open(TMP .. '/nv-extras-record', 'w')
  f:write(part.status().session.recordPath)
  f:close()
end

local ok, err = xpcall(function()
  pure()
  plugins()
  sessions()
end, debug.traceback)
check('the test script ran without a Lua error', ok, err)
pcall(core.stop, { silent = true })
write_results()
vim.cmd('qa!')
