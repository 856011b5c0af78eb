-- qwen_companion.log: the plugin's log file, `qwen-companion.log` in
-- Neovim's log folder (stdpath('log'); stdpath('cache') before Neovim 0.8),
-- opened by :QwenLog. One line per entry:
--
--   2026-12-06T03:04:05Z WARN  plugins: plugin com.example.notes exited (code 1)
--
-- What goes there: the library's log lines that reach Neovim (the pulled
-- `log` events of the companion, the plugin host and the participant; the
-- library never calls Lua on its own threads, so lines it only gives to a
-- log callback are not seen), the plugin's own warnings and errors (what
-- vim.notify showed), the plugin host's events (a plugin started, exited,
-- was disabled) and each editor tool request with its outcome.
-- The file is bounded: past MAX_BYTES it is renamed to
-- `qwen-companion.log.1` (replacing the older one) and a new file begins.

local M = {}

--- The size at which the file is rotated.
M.MAX_BYTES = 1024 * 1024

--- Level names (the library's QC_LOG_* numbers 1..5 index this list).
M.LEVELS = { 'ERROR', 'WARN', 'INFO', 'DEBUG', 'TRACE' }

local override = nil -- tests: another file

--- The log folder: stdpath('log') where Neovim has it, else stdpath('cache').
function M.dir()
  local ok, dir = pcall(vim.fn.stdpath, 'log')
  if not ok or type(dir) ~= 'string' or dir == '' then
    dir = vim.fn.stdpath('cache')
  end
  return dir
end

--- The log file's path.
function M.path()
  return override or require('qwen_companion.platform').join(M.dir(), 'qwen-companion.log')
end

--- Uses `path` instead (nil: the default again). For tests.
function M.set_path(path)
  override = path
end

--- A level's name: a QC_LOG_* number or a name.
function M.level_name(level)
  if type(level) == 'string' then
    return level:upper()
  end
  return M.LEVELS[level] or 'INFO'
end

--- The line written for an entry (no trailing newline); a message over
--- several lines is kept on one, its breaks shown as `\n`.
function M.format(level, source, message, time)
  local msg = tostring(message):gsub('\r?\n', '\\n')
  return string.format('%s %-5s %s: %s', os.date('!%Y-%m-%dT%H:%M:%SZ', time or os.time()), M.level_name(level),
    tostring(source), msg)
end

-- Rotates when `extra` more bytes would take the file past MAX_BYTES.
local function rotate(path, extra)
  local st = vim.loop.fs_stat(path)
  if st and st.size + extra > M.MAX_BYTES then
    os.remove(path .. '.1')
    os.rename(path, path .. '.1')
  end
end

local failed = false

--- Appends one entry (level: a QC_LOG_* number or a name; source: 'companion', 'plugins', 'participant', 'tools', …).
--- Returns true, or nil and a message (reported once in :messages).
function M.write(level, source, message)
  local path = M.path()
  local line = M.format(level, source, message) .. '\n'
  local dir = vim.fn.fnamemodify(path, ':h')
  if vim.fn.isdirectory(dir) == 0 then
    pcall(vim.fn.mkdir, dir, 'p') -- a failure shows when the file is opened
  end
  rotate(path, #line)
  local f, err = io.open(path, 'a')
  if not f then
    if not failed then
      failed = true
      vim.schedule(function()
        vim.api.nvim_echo({ { 'qwen-companion: cannot write the log ' .. tostring(err), 'WarningMsg' } }, true, {})
      end)
    end
    return nil, err
  end
  f:write(line)
  f:close()
  return true
end

--- A library `log` event (`{"type":"log","level":N|"warn","message":…}`)
--- of `source`: written. Returns true when `ev` was one.
function M.event(source, ev)
  if type(ev) ~= 'table' or ev.type ~= 'log' then
    return false
  end
  M.write(ev.level, source, ev.message or ev.text or '')
  return true
end

local VIM_LEVELS = {}
for name, n in pairs(vim.log.levels) do
  VIM_LEVELS[n] = name == 'WARN' and 'WARN' or name
end

--- The name of a vim.log.levels number (INFO when nil).
function M.vim_level(level)
  return VIM_LEVELS[level or vim.log.levels.INFO] or 'INFO'
end

--- :QwenLog: opens the log file (in a split; `vertical`: a vertical one).
function M.open(vertical)
  local path = M.path()
  if vim.fn.filereadable(path) == 0 then
    M.write('INFO', 'neovim', 'log opened')
  end
  vim.cmd((vertical and 'vsplit ' or 'split ') .. vim.fn.fnameescape(path))
  vim.bo.autoread = true
  vim.cmd('normal! G')
  return path
end

return M
