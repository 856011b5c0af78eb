-- qwen_companion.terminal: the agent terminals the plugin manages, one per
-- agent CLI: Qwen Code (`qwen`) and Gemini CLI (`gemini`). Both work the same
-- way (this module, parameterised by the agent's name):
--
--   :QwenToggle / :GeminiToggle   show it (start it when none runs), focus
--                 it when it is visible but not focused, hide it when it is
--                 focused
--   :QwenRun [args] / :GeminiRun [args]  start it (or, when it runs, show
--                 and focus it)
--   :QwenEnv      the lines that set the companion's variables in a shell
--                 outside Neovim (platform.env_lines)
--
-- A terminal runs its command (`terminal.cmd`, default qwen; `gemini_command`,
-- default gemini) in the workspace root with every variable of the companion
-- (Qwen Code's and Gemini CLI's, whichever it serves, and the plugin MCP
-- server's, and those of add_terminal_env providers) passed to the job
-- explicitly. It is shown in a split on the right or at the bottom, or in a
-- floating window (setup{ terminal = { position = 'right'|'bottom'|'float',
-- size = … } }, the same for both agents); `terminal.split` (an Ex command
-- such as 'botright split') overrides the split position. Hiding keeps the
-- job and its buffer: toggling again shows the same CLI. :QwenAdd types into
-- the agent terminal used last (qwen_companion.prompt): the one started,
-- focused or entered most recently.

local api = vim.api

local M = {}

--- The agents: their name for the user, their commands, the program they run
--- by default and the option that changes it, and whether the companion
--- serves them for a `cli` setting.
M.AGENTS = {
  qwen = {
    name = 'Qwen Code',
    toggle = ':QwenToggle',
    run = ':QwenRun',
    program = 'qwen',
    option = 'terminal.cmd',
    served = { qwen = true, both = true },
  },
  gemini = {
    name = 'Gemini CLI',
    toggle = ':GeminiToggle',
    run = ':GeminiRun',
    program = 'gemini',
    option = 'gemini_command',
    served = { gemini = true, both = true },
  },
}

-- agent -> the managed terminal { job, buf, cmd, cwd, env, agent } (nil when
-- none was started).
local terms = {}
-- agent -> when it was last started, focused or entered (a counter).
local used = {}
local use_count = 0

local function agent_of(agent)
  agent = agent or 'qwen'
  local a = M.AGENTS[agent]
  if not a then
    error(string.format("qwen_companion.terminal: unknown agent %s (known: 'qwen', 'gemini')", vim.inspect(agent)), 2)
  end
  return agent, a
end

local function mark_used(agent)
  use_count = use_count + 1
  used[agent] = use_count
end

--- The argv (list) or shell command (string) to run: `cmd` with `args`
--- appended (shell-escaped for a string command).
function M.command(cmd, args)
  args = args or {}
  if type(cmd) == 'string' then
    local parts = { cmd }
    for _, a in ipairs(args) do
      parts[#parts + 1] = vim.fn.shellescape(a)
    end
    return table.concat(parts, ' ')
  end
  local argv = vim.list_extend({}, cmd)
  return vim.list_extend(argv, args)
end

--- The command `agent` runs, from the options (`config`, default the ones in
--- use): `terminal.cmd` for qwen, `gemini_command` for gemini, else the
--- program's name.
function M.agent_command(agent, config)
  local name, a = agent_of(agent)
  config = config or require('qwen_companion').config
  local cmd
  if name == 'gemini' then
    cmd = config.gemini_command
  else
    cmd = (config.terminal or {}).cmd
  end
  return cmd or a.program
end

--- The lines that set the terminal variables (qwen_companion.terminal_env())
--- in a shell started outside Neovim (:QwenEnv): `shell` ('posix', 'fish',
--- 'powershell', 'cmd'), else setup's terminal.shell ('auto': PowerShell on
--- Windows, else after $SHELL). Returns the list, or nil and a message (not
--- running; cmd cannot carry a line break, `"` or `%`).
function M.env_lines(shell)
  local qc = require('qwen_companion')
  if not qc.status() then
    return nil, 'not running (:QwenStart)'
  end
  local platform = require('qwen_companion.platform')
  local chosen, err = platform.shell_for(shell or (qc.config.terminal or {}).shell)
  if not chosen then
    return nil, err
  end
  return platform.env_lines(qc.terminal_env(), chosen)
end

local function job_running(job)
  return job ~= nil and vim.fn.jobwait({ job }, 0)[1] == -1
end

--- The running terminal of `agent` ('qwen' by default, or 'gemini')
--- `{ job, buf, cmd, cwd, env, agent }`, or nil (none started, its job ended
--- or its buffer was wiped).
function M.current(agent)
  local t = terms[agent_of(agent)]
  if t and api.nvim_buf_is_valid(t.buf) and job_running(t.job) then
    return t
  end
  return nil
end

--- The agent whose terminal was used last (started, focused or entered)
--- among those running ('qwen' or 'gemini'), or nil when none runs.
function M.last_used()
  local best, when = nil, -1
  for name in pairs(M.AGENTS) do
    if M.current(name) and (used[name] or 0) > when then
      best, when = name, used[name] or 0
    end
  end
  return best
end

--- The windows of the current tab page that show `agent`'s terminal.
function M.windows(agent)
  local t = M.current(agent)
  if not t then
    return {}
  end
  local wins = {}
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == t.buf then
      wins[#wins + 1] = win
    end
  end
  return wins
end

--- 'hidden' (running, not shown in this tab), 'visible' (shown, not
--- focused), 'focused' or 'none' (no terminal of `agent` running).
function M.state(agent)
  local t = M.current(agent)
  if not t then
    return 'none'
  end
  local wins = M.windows(agent)
  if #wins == 0 then
    return 'hidden'
  end
  return vim.tbl_contains(wins, api.nvim_get_current_win()) and 'focused' or 'visible'
end
-- `size` as a number of cells out of `total`: a fraction (0 < size < 1) of
-- it, or a whole number of cells; at least 1, at most total - 1.
function M.cells(size, total, default)
  local n = size or default
  if n > 0 and n < 1 then
    n = math.floor(total * n + 0.5)
  end
  return math.max(1, math.min(math.floor(n), math.max(1, total - 1)))
end

local function options()
  return (require('qwen_companion').config.terminal or {})
end

--- The floating window's config for the editor's size (`columns`, `lines`):
--- centred, `size` of each (default 0.8).
function M.float_config(size, columns, lines)
  local w = M.cells(size, columns, 0.8)
  local h = M.cells(size, lines - 2, 0.8)
  return {
    relative = 'editor',
    width = w,
    height = h,
    col = math.floor((columns - w) / 2),
    row = math.max(0, math.floor((lines - 2 - h) / 2)),
    style = 'minimal',
    border = 'rounded',
  }
end

--- The Ex command that opens the split for `opts` (terminal options):
--- `opts.split` when set, else after `position` ('right': a vertical split
--- on the far right, 'bottom': a split at the bottom) with `size`.
function M.split_command(opts, columns, lines)
  if opts.split then
    return opts.split
  end
  if opts.position == 'bottom' then
    return string.format('botright %dsplit', M.cells(opts.size, lines - 2, 0.3))
  end
  return string.format('botright %dvsplit', M.cells(opts.size, columns, 0.4))
end

-- Opens a window for `buf` (the terminal's, or a new one) where the options
-- say, and makes it current. Returns the window, or nil and a message.
local function open_window(buf)
  local opts = options()
  if opts.position == 'float' and not opts.split then
    local ok, win = pcall(api.nvim_open_win, buf, true,
      M.float_config(opts.size, vim.o.columns, vim.o.lines))
    if not ok then
      return nil, 'cannot open the floating window: ' .. tostring(win)
    end
    return win
  end
  local cmd = M.split_command(opts, vim.o.columns, vim.o.lines)
  local ok, err = pcall(vim.cmd, cmd)
  if not ok then
    return nil, 'terminal.split (' .. tostring(cmd) .. '): ' .. tostring(err)
  end
  api.nvim_win_set_buf(0, buf)
  return api.nvim_get_current_win()
end

local function enter(win, agent)
  api.nvim_set_current_win(win)
  mark_used(agent)
  vim.cmd('startinsert') -- type into the CLI at once, as after :terminal + i
end

local function none_running(a)
  return string.format('no %s terminal is running (%s or %s starts one)', a.name, a.toggle, a.run)
end

--- Shows `agent`'s running terminal (in a new window when it is hidden) and
--- focuses it. Returns its window, or nil and a message.
function M.focus(agent)
  local name, a = agent_of(agent)
  local t = M.current(name)
  if not t then
    return nil, none_running(a)
  end
  local win = M.windows(name)[1]
  if not win then
    local err
    win, err = open_window(t.buf)
    if not win then
      return nil, err
    end
  end
  enter(win, name)
  return win
end

--- Hides `agent`'s terminal: closes its windows in this tab (the job and its
--- buffer stay). A terminal that is the last window is left shown.
function M.hide(agent)
  for _, win in ipairs(M.windows(agent)) do
    if #api.nvim_tabpage_list_wins(0) > 1 then
      api.nvim_win_close(win, true)
    end
  end
end

--- Whether the running companion serves `agent` (its `cli`: 'qwen',
--- 'gemini' or 'both').
function M.served(agent, status)
  local _, a = agent_of(agent)
  return status ~= nil and a.served[status.cli or 'qwen'] == true
end

--- Starts `agent`'s terminal ('qwen' by default, or 'gemini') in a new
--- window: the companion first when it is not running. Returns true and
--- `{ job, buf, win, env, cmd, cwd, agent }`, or nil and a message. With
--- that terminal already running it is shown and focused instead (a message
--- says the arguments were not used). A CLI the companion does not serve
--- (setup{ cli }) still starts, with a warning that it has no IDE connection.
function M.run(args, agent)
  local name, a = agent_of(agent)
  args = args or {}
  if M.current(name) then
    local win, err = M.focus(name)
    if not win then
      return nil, err
    end
    if #args > 0 then
      require('qwen_companion.notify')(string.format('%s already runs in its terminal; stop it (exit %s) to start it with %s',
        a.name, a.program, table.concat(args, ' ')), vim.log.levels.WARN)
    end
    return true, vim.tbl_extend('force', {}, terms[name], { win = win })
  end
  local old = terms[name]
  if old and api.nvim_buf_is_valid(old.buf) then
    -- the CLI exited: its buffer ("[Process exited …]") and windows go
    pcall(api.nvim_buf_delete, old.buf, { force = true })
  end
  terms[name] = nil
  local qc = require('qwen_companion')
  if not qc.status() then
    local ok, err = qc.start()
    if not ok then
      return nil, err
    end
  end
  local status = qc.status()
  local cmd = M.command(M.agent_command(name), args)
  local env = qc.terminal_env()
  local buf = api.nvim_create_buf(false, false)
  local win, werr = open_window(buf)
  if not win then
    pcall(api.nvim_buf_delete, buf, { force = true })
    return nil, werr
  end
  local cwd = status.root
  local jopts = { cwd = cwd }
  if next(env) ~= nil then -- an empty Lua table would reach Vimscript as a list
    jopts.env = env
  end
  local jok, job = pcall(vim.fn.termopen, cmd, jopts)
  if not jok or job <= 0 then
    pcall(api.nvim_buf_delete, buf, { force = true })
    return nil, string.format('cannot run %s (%s, setup{ %s }): %s', vim.inspect(cmd), a.name, a.option,
      jok and (job == -1 and 'not executable' or 'invalid arguments') or tostring(job))
  end
  vim.b[buf].qwen_companion_terminal = true
  vim.b[buf].qwen_companion_agent = name
  vim.bo[buf].bufhidden = 'hide' -- hiding the window keeps the CLI running
  api.nvim_create_autocmd({ 'BufEnter', 'TermEnter' }, {
    buffer = buf,
    desc = 'qwen-companion: the ' .. a.name .. ' terminal is the one :QwenAdd types into',
    callback = function()
      mark_used(name)
    end,
  })
  terms[name] = { job = job, buf = buf, cmd = cmd, cwd = cwd, env = env, agent = name }
  enter(win, name)
  if not M.served(name, status) then
    require('qwen_companion.notify')(string.format("%s runs without the IDE connection: the companion serves cli = '%s';"
      .. " setup{ cli = '%s' } or cli = 'both' connects it (the companion restarts)", a.name, status.cli or 'qwen',
      name), vim.log.levels.WARN)
  end
  return true, { job = job, buf = buf, win = win, env = env, cmd = cmd, cwd = cwd, agent = name }
end

--- :QwenToggle / :GeminiToggle: no terminal → start one; hidden → show and
--- focus it; visible but not focused → focus it; focused → hide it. Returns
--- the new state ('focused' or 'hidden'), or nil and a message.
function M.toggle(agent)
  local name = agent_of(agent)
  local st = M.state(name)
  if st == 'none' then
    local ok, err = M.run({}, name)
    if not ok then
      return nil, err
    end
    return 'focused'
  elseif st == 'focused' then
    M.hide(name)
    return M.state(name) == 'focused' and 'focused' or 'hidden'
  end
  local win, err = M.focus(name)
  if not win then
    return nil, err
  end
  return 'focused'
end

--- Types `text` into `agent`'s running terminal (no Enter unless the text
--- has one). Returns true, or nil and a message when none runs.
function M.send(text, agent)
  local name, a = agent_of(agent)
  local t = M.current(name)
  if not t then
    return nil, none_running(a)
  end
  local ok, err = pcall(vim.fn.chansend, t.job, text)
  if not ok or err == 0 then
    return nil, 'cannot type into the ' .. a.name .. ' terminal: ' .. tostring(ok and 'the job does not read' or err)
  end
  return true
end

return M
