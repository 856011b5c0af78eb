-- qwen_companion.terminal: :QwenRun, a :terminal split running Qwen Code
-- (setup{ terminal = { cmd = 'qwen', split = 'botright split' } }) with the
-- companion's variables (and the plugin MCP server's, and those of
-- add_terminal_env providers) passed to the job explicitly, in the
-- workspace root. Starts the companion first when it is not running. And
-- :QwenEnv's lines, for a shell outside Neovim (platform.env_lines).

local M = {}

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

--- Opens the split and starts the command. Returns true and
--- `{ job, buf, win, env, cmd }`, or nil and a message.
function M.run(args)
  local qc = require('qwen_companion')
  if not qc.status() then
    local ok, err = qc.start()
    if not ok then
      return nil, err
    end
  end
  local t = qc.config.terminal or {}
  local cmd = M.command(t.cmd or 'qwen', args)
  local env = qc.terminal_env()
  local ok, err = pcall(vim.cmd, t.split or 'botright split')
  if not ok then
    return nil, 'terminal.split (' .. tostring(t.split) .. '): ' .. tostring(err)
  end
  vim.cmd('enew')
  local buf, win = vim.api.nvim_get_current_buf(), vim.api.nvim_get_current_win()
  local jopts = { cwd = qc.status().root }
  if next(env) ~= nil then -- an empty Lua table would reach Vimscript as a list
    jopts.env = env
  end
  local jok, job = pcall(vim.fn.termopen, cmd, jopts)
  if not jok or job <= 0 then
    pcall(vim.api.nvim_buf_delete, buf, { force = true })
    return nil, string.format('cannot run %s: %s', vim.inspect(cmd),
      jok and (job == -1 and 'not executable' or 'invalid arguments') or tostring(job))
  end
  vim.b[buf].qwen_companion_terminal = true
  vim.cmd('startinsert') -- type into qwen at once, as after :terminal + i
  return true, { job = job, buf = buf, win = win, env = env, cmd = cmd }
end

return M
