-- qwen_companion.health_report: :QwenHealth, the library's health report
-- (qc_health_json: the library's version, `qwen`, `gemini` (when Gemini CLI
-- is served) and `node` found and their versions against the tested ones,
-- the discovery files, the connected CLIs, the
-- plugin MCP server and its registration, the participant), one line per
-- check in the library's order with its detail below, then what Neovim
-- itself knows (its version, the log file, the Qwen Code and Gemini CLI
-- terminals, the CLIs served and their discovery files, the editor tools,
-- the open diffs). :checkhealth qwen_companion shows the same
-- checks in its own format (qwen_companion.health).

local ffi = require('ffi')

local M = {}

--- The mark of each status in :QwenHealth.
M.MARKS = { ok = 'OK', warn = 'WARN', error = 'ERROR', off = 'OFF' }

-- The program of a terminal command: argv[1], or a string without a space
-- (nil for a shell line).
local function program(cmd)
  if type(cmd) == 'table' and type(cmd[1]) == 'string' then
    return cmd[1]
  elseif type(cmd) == 'string' and not cmd:find('%s') then
    return cmd
  end
end

--- The options of qc_health_json: the `qwen` and the `gemini` the
--- terminals run (when they are programs, not shell lines), the CLIs
--- served (`cli`: the library checks gemini for 'gemini' and 'both'; both
--- left out for 'qwen') and the plugin host's `node`.
function M.options(config)
  config = config or require('qwen_companion').config
  local o = {}
  o.qwen = program((config.terminal or {}).cmd)
  -- Only when Gemini CLI is served: with 'qwen' (the library's default) the
  -- report has no gemini check, and a library older than `cli` still answers.
  local cli = config.cli
  if cli == nil then
    cli = vim.g.qwen_companion_cli
  end
  if cli == 'gemini' or cli == 'both' then
    o.cli = cli
    o.gemini = program(config.gemini_command or 'gemini')
  end
  local node = (config.plugins or {}).node
  if type(node) == 'string' and node ~= '' then
    o.node = node
  end
  return o
end

--- Runs qc_health_json on the running objects (each may be absent).
--- Blocks while the library runs `qwen --version` and `node --version`
--- (at most 5 s each). Returns the decoded report, or nil, a message and
--- 'missing' when the library is older than the report.
function M.library_report()
  local capi = require('qwen_companion.capi')
  local qc = require('qwen_companion')
  local h = qc.handles()
  local lib = h.lib
  if not lib then
    local err
    lib, err = capi.load(capi.library_path(qc.config.lib))
    if not lib then
      return nil, err
    end
  end
  local p = nil
  local part = package.loaded['qwen_companion.participant']
  local pst = part and part._state and part._state()
  if pst and pst.lib == lib then
    p = pst.p
  end
  if not pcall(function()
    return lib.qc_health_json
  end) then
    return nil, 'this library (version ' .. ffi.string(lib.qc_version()) .. ') has no health report:'
      .. ' update it (:QwenInstall)', 'missing'
  end
  local json, err = capi.out_string(lib, 'qc_health_json', vim.json.encode(M.options()), h.c, h.h, p)
  if not json then
    return nil, err
  end
  local ok, v = pcall(vim.json.decode, json)
  if not ok or type(v) ~= 'table' then
    return nil, 'qc_health_json: bad JSON: ' .. tostring(v)
  end
  return v
end

local function str(v)
  if v == nil or v == vim.NIL then
    return nil
  end
  return tostring(v)
end

--- The report's lines: a heading with the library's version, ABI and
--- platform, then per check `[STATUS] summary` and its detail indented.
function M.format(report)
  local lines = {}
  local lib = type(report.library) == 'table' and report.library or {}
  lines[#lines + 1] = string.format('Library %s (ABI %s, %s)', str(lib.version) or '?', str(lib.abi) or '?',
    str(lib.platform) or '?')
  for _, c in ipairs(type(report.checks) == 'table' and report.checks or {}) do
    local mark = M.MARKS[c.status] or tostring(c.status):upper()
    lines[#lines + 1] = string.format('  [%s] %s: %s', mark, str(c.id) or '?', str(c.summary) or '')
    if str(c.detail) then
      for _, l in ipairs(vim.split(str(c.detail), '\n', { plain = true })) do
        lines[#lines + 1] = '        ' .. l
      end
    end
  end
  return lines
end

--- What Neovim knows, as lines: its version, the log file, the terminal,
--- the editor tools, the diffs.
function M.neovim_lines()
  local qc = require('qwen_companion')
  local v = vim.version()
  local lines = {
    'Neovim',
    string.format('  Neovim %d.%d.%d, %s', v.major, v.minor, v.patch, jit and jit.version or 'no LuaJIT'),
    '  log file: ' .. require('qwen_companion.log').path() .. ' (:QwenLog)',
  }
  local t = require('qwen_companion.terminal')
  for _, agent in ipairs({ 'qwen', 'gemini' }) do
    local a, cur = t.AGENTS[agent], t.current(agent)
    if cur then
      lines[#lines + 1] = string.format('  %s terminal: %s (job %d in %s, %s)%s', a.name, t.state(agent), cur.job,
        cur.cwd, type(cur.cmd) == 'table' and table.concat(cur.cmd, ' ') or tostring(cur.cmd),
        t.last_used() == agent and ', :QwenAdd types here' or '')
    else
      lines[#lines + 1] = string.format('  %s terminal: none (%s starts it)', a.name, a.toggle)
    end
  end
  local s = qc.status()
  if not s then
    lines[#lines + 1] = '  companion: not running (:QwenStart)'
    return lines
  end
  lines[#lines + 1] = string.format('  companion: 127.0.0.1:%d for %s, %s CLI(s) connected', s.port, s.root,
    tostring(s.clients))
  vim.list_extend(lines, M.served_lines(s, '  '))
  local p = s.plugins
  if p.editor_tools then
    lines[#lines + 1] = '  editor tools offered: ' .. table.concat(require('qwen_companion.editor_tools').CAPABILITIES, ', ')
  else
    lines[#lines + 1] = '  editor tools: not offered' .. (p.editor_tools_error and (' (' .. p.editor_tools_error .. ')')
      or (p.running and ' (setup{ editor_tools = false })' or ' (no plugin host)'))
  end
  lines[#lines + 1] = string.format('  open diffs: %d', #s.diffs)
  if s.last_error then
    lines[#lines + 1] = '  last error: ' .. tostring(s.last_error)
  end
  return lines
end

--- The CLIs a running companion serves (status `s`) and the discovery file
--- of each, as lines with `indent`.
function M.served_lines(s, indent)
  local t = require('qwen_companion.terminal')
  local lines = {}
  local names = {}
  for _, agent in ipairs({ 'qwen', 'gemini' }) do
    if t.served(agent, s) then
      names[#names + 1] = t.AGENTS[agent].name
    end
  end
  lines[#lines + 1] = string.format("%sserves: %s (cli = '%s')", indent, table.concat(names, ' and '), s.cli or 'qwen')
  local files = s.discovery_files or {}
  for _, agent in ipairs({ 'qwen', 'gemini' }) do
    if files[agent] then
      lines[#lines + 1] = string.format('%s%s discovery file: %s', indent, t.AGENTS[agent].name, files[agent])
    end
  end
  return lines
end

--- All lines of :QwenHealth.
function M.lines()
  local lines = {}
  local report, err = M.library_report()
  if report then
    vim.list_extend(lines, M.format(report))
  else
    lines[#lines + 1] = 'Library'
    lines[#lines + 1] = '  [ERROR] no report: ' .. tostring(err)
  end
  lines[#lines + 1] = ''
  vim.list_extend(lines, M.neovim_lines())
  return lines
end

local HL = { OK = 'DiagnosticOk', WARN = 'DiagnosticWarn', ERROR = 'DiagnosticError', OFF = 'Comment' }

--- :QwenHealth: the report in a scratch buffer (a split). Returns its
--- buffer.
function M.show()
  local lines = M.lines()
  vim.cmd('botright new')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = 'nofile', 'wipe', false
  pcall(vim.api.nvim_buf_set_name, buf, 'qwen-companion://health')
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  local ns = vim.api.nvim_create_namespace('qwen_companion_health')
  for i, l in ipairs(lines) do
    local mark = l:match('^  %[(%u+)%]')
    if mark and HL[mark] then
      pcall(vim.api.nvim_buf_add_highlight, buf, ns, HL[mark], i - 1, 2, 4 + #mark)
    end
  end
  return buf
end

return M
