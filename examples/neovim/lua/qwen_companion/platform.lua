-- qwen_companion.platform: what differs between Linux, macOS and Windows.
-- Every function takes the OS name (`jit.os` values: 'Linux', 'OSX',
-- 'Windows', 'BSD', …; default: this one) so that each OS's answer can be
-- tested anywhere:
--   library_file_name / bridge_file_name   the files the plugin loads and copies
--   is_absolute / join                      paths
--   shell_for / env_line / env_lines        "set these in your shell" lines
--   watch_events                            the pull-mode event handle in the main loop

local M = {}

--- The shells env_line writes for.
M.SHELLS = { 'posix', 'fish', 'powershell', 'cmd' }

--- How often the main loop takes events on Windows, where libuv cannot
--- watch the library's event HANDLE (milliseconds).
M.WINDOWS_EVENT_INTERVAL_MS = 20

local function os_of(name)
  return name or jit.os
end

function M.is_windows(name)
  return os_of(name) == 'Windows'
end

--- libqwen_companion.so (Linux, BSD), libqwen_companion.dylib (macOS),
--- qwen_companion.dll (Windows, msvc and gnu builds alike).
function M.library_file_name(name)
  local o = os_of(name)
  if o == 'Windows' then
    return 'qwen_companion.dll'
  elseif o == 'OSX' then
    return 'libqwen_companion.dylib'
  end
  return 'libqwen_companion.so'
end

--- qc-mcp-bridge, or qc-mcp-bridge.exe on Windows.
function M.bridge_file_name(name)
  return M.is_windows(name) and 'qc-mcp-bridge.exe' or 'qc-mcp-bridge'
end

--- True for `/x` (and, on Windows, `C:\x`, `C:/x`, `\\server\share`).
function M.is_absolute(path, name)
  if type(path) ~= 'string' or path == '' then
    return false
  end
  if M.is_windows(name) then
    return path:match('^%a:[\\/]') ~= nil or path:match('^[\\/][\\/]') ~= nil
  end
  return path:sub(1, 1) == '/'
end

--- `dir` and `leaf` joined with the OS's separator (`\` on Windows).
function M.join(dir, leaf, name)
  local sep = M.is_windows(name) and '\\' or '/'
  if dir:sub(-1) == '/' or dir:sub(-1) == sep then
    return dir .. leaf
  end
  return dir .. sep .. leaf
end

--- The folder of `path` (`\` and `/` both separate on Windows).
function M.dirname(path, name)
  if M.is_windows(name) then
    local dir = path:match('^(.*)[\\/][^\\/]*$')
    if dir == nil then
      return '.'
    end
    return dir:match('^%a:$') and dir .. '\\' or dir
  end
  return vim.fn.fnamemodify(path, ':h')
end

---------------------------------------------------------------------------
-- shell lines
---------------------------------------------------------------------------

--- The shell to write lines for: `setting` when it is one of M.SHELLS;
--- for 'auto' (or nil), PowerShell on Windows, else fish or PowerShell when
--- `shell` ($SHELL by default) is one of them, else 'posix'. Returns the
--- shell, or nil and a message.
function M.shell_for(setting, name, shell)
  local choice = (setting == nil or setting == '') and 'auto' or tostring(setting):lower()
  if vim.tbl_contains(M.SHELLS, choice) then
    return choice
  end
  if choice ~= 'auto' then
    return nil, string.format("unknown terminal shell '%s': use one of auto, %s", tostring(setting), table.concat(M.SHELLS, ', '))
  end
  if M.is_windows(name) then
    return 'powershell'
  end
  local base = vim.fn.fnamemodify(shell or os.getenv('SHELL') or '', ':t')
  if base == 'fish' then
    return 'fish'
  elseif base == 'pwsh' or base == 'powershell' then
    return 'powershell'
  end
  return 'posix'
end

-- PowerShell ends a single-quoted string at ' and at the typographic single
-- quotes U+2018..U+201B; doubling one makes it literal.
local PS_QUOTES = { "'", '\226\128\152', '\226\128\153', '\226\128\154', '\226\128\155' }

local function powershell(v)
  for _, q in ipairs(PS_QUOTES) do
    v = v:gsub(vim.pesc(q), q .. q)
  end
  return "'" .. v .. "'"
end

local CMD_REFUSED = {
  { '\n', 'a line break' },
  { '\r', 'a line break' },
  { '"', 'a double quote (")' },
  { '%', 'a percent sign (%), which cmd expands as a variable reference' },
}

--- One line that sets `key` to `value` in `shell` (one of M.SHELLS):
--- export K='v' | set -gx K 'v' | $env:K = 'v' | set "K=v". Every character
--- of `value` arrives verbatim. Returns the line, or nil and a message (a
--- bad name; cmd cannot carry a line break, `"` or `%`).
function M.env_line(key, value, shell)
  if type(key) ~= 'string' or not key:match('^[%a_][%w_]*$') then
    return nil, 'not an environment variable name: ' .. vim.inspect(key)
  end
  value = tostring(value)
  if value:find('\0', 1, true) then
    return nil, 'the value of ' .. key .. ' contains a NUL character'
  end
  if shell == 'posix' then
    return 'export ' .. key .. "='" .. value:gsub("'", "'\\''") .. "'"
  elseif shell == 'fish' then
    return 'set -gx ' .. key .. " '" .. value:gsub('\\', '\\\\'):gsub("'", "\\'") .. "'"
  elseif shell == 'powershell' then
    return '$env:' .. key .. ' = ' .. powershell(value)
  elseif shell == 'cmd' then
    for _, r in ipairs(CMD_REFUSED) do
      if value:find(r[1], 1, true) then
        return nil, string.format('cmd cannot set %s to a value with %s: use PowerShell (terminal shell "powershell") for this variable', key, r[2])
      end
    end
    return 'set "' .. key .. '=' .. value .. '"' -- & | < > ^ ( ) ; and spaces are literal inside the quotes
  end
  return nil, string.format("unknown shell '%s': use one of %s", tostring(shell), table.concat(M.SHELLS, ', '))
end

--- env_line for each variable of `env`, sorted by name. Returns the list,
--- or nil and the first message.
function M.env_lines(env, shell)
  local keys = vim.tbl_keys(env)
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local line, err = M.env_line(k, env[k], shell)
    if not line then
      return nil, err
    end
    out[#out + 1] = line
  end
  return out
end

---------------------------------------------------------------------------
-- the pull-mode event handle
---------------------------------------------------------------------------

--- 'poll' (a libuv poll on the descriptor: Linux, macOS) or 'timer' (Windows:
--- the int32_t carries an event HANDLE, which libuv cannot watch, so a
--- timer takes the events every WINDOWS_EVENT_INTERVAL_MS; next_event never
--- blocks).
function M.event_watch_method(name)
  return M.is_windows(name) and 'timer' or 'poll'
end

--- Calls `on_ready(err)` in the main loop (a fast context) whenever events
--- may wait on the handle `value` of *_enable_events. Returns the libuv handle
--- (stop and close it before freeing the object), or nil and a message.
function M.watch_events(value, on_ready, name)
  local uv = vim.uv or vim.loop
  if M.event_watch_method(name) == 'timer' then
    local timer = uv.new_timer()
    local ms = M.WINDOWS_EVENT_INTERVAL_MS
    local ok, err = timer:start(ms, ms, function()
      on_ready(nil)
    end)
    if not ok then
      timer:close()
      return nil, 'cannot start the event timer: ' .. tostring(err)
    end
    return timer
  end
  local poll, perr = uv.new_poll(value)
  if not poll then
    return nil, 'cannot watch the event descriptor ' .. tostring(value) .. ': ' .. tostring(perr)
  end
  local ok, err = poll:start('r', function(e)
    on_ready(e)
  end)
  if not ok then
    poll:close()
    return nil, 'cannot watch the event descriptor ' .. tostring(value) .. ': ' .. tostring(err)
  end
  return poll
end

return M
