-- qwen_companion.config: the defaults of setup() and their validation.
--
-- setup(opts) checks every key with vim.validate (a wrong type is an error
-- naming the key, e.g. "plugins.dir: expected string, got number") and
-- refuses unknown keys (a typo is not silently ignored). Nothing is changed
-- when the options are refused.

local M = {}

--- The defaults. `setup(opts)` overrides them, and the
--- `vim.g.qwen_companion_<key>` variables are read for the top-level keys
--- left nil.
function M.defaults()
  return {
    lib = nil, -- library path (else vim.g.qwen_companion_lib, $QWEN_COMPANION_LIB, next to the plugin, 'qwen_companion')
    lock_dir = nil, -- lock file directory (default: $QWEN_HOME/ide, else ~/.qwen/ide)
    -- The CLIs the companion serves: 'qwen' (Qwen Code), 'gemini' (Gemini
    -- CLI) or 'both' (one server, one port, each CLI's discovery file and
    -- terminal variables). nil: vim.g.qwen_companion_cli, else 'qwen'.
    -- Changing it with setup() restarts a running companion.
    cli = nil,
    -- Gemini CLI's discovery file directory (default: <temp dir>/gemini/ide,
    -- the temp dir as Node.js finds it: $TMPDIR, $TMP or $TEMP, else /tmp)
    gemini_dir = nil,
    -- The Gemini CLI terminal's command (:GeminiToggle, :GeminiRun): a string
    -- (run by the shell) or a list (argv)
    gemini_command = 'gemini',
    autostart = false, -- start on VimEnter
    ide_name = 'Neovim',
    ide_id = 'neovim',
    debounce_ms = nil,
    max_wait_ms = nil,
    trusted = nil, -- workspace trust (library default: true)
    -- How long Qwen Code's openDiff/closeDiff wait for Neovim, in ms (library
    -- default 30000, range 100..600000). A request still unanswered then (the
    -- main loop was busy that long) fails in the CLI and is never handed to Neovim.
    request_timeout_ms = nil,
    diffs = true, -- show Qwen Code's proposed edits (false: openDiff answers "no diff view")
    -- The plugin host started next to the companion, with its MCP server.
    plugins = {
      enabled = true,
      dir = nil, -- plugins directory (default $QWEN_HOME/companion/plugins, else ~/.qwen/companion/plugins)
      node = nil, -- the node binary (default: `node` in PATH)
      mcp = true, -- run the MCP server that gives Qwen Code the plugins' tools
      always_load_tools = nil, -- the entry's alwaysLoadTools (nil: Qwen Code defers the tools)
    },
    -- Write the `qwen-companion-plugins` entry of ~/.qwen/settings.json
    -- (user scope) once, starting the bridge copied to ~/.qwen/companion/bin.
    register_mcp = true,
    -- Where :QwenInstall downloads the release archives and SHA256SUMS from
    -- (nil: vim.g.qwen_companion_download_url, $QWEN_COMPANION_DOWNLOAD_URL,
    -- else the GitHub release of the plugin's git origin). https://, file:// or a folder.
    download_url = nil,
    -- Offer the editor tools (diagnostics, open a file, the open editors,
    -- the selection) to Qwen Code on the plugin MCP server.
    editor_tools = true,
    -- The Qwen Code terminal (:QwenToggle, :QwenRun, :QwenAdd)
    terminal = {
      cmd = 'qwen', -- a string (run by the shell) or a list (argv)
      position = 'right', -- 'right', 'bottom' or 'float'
      -- the split's width ('right') or height ('bottom'), or the float's
      -- share of the editor: a fraction (0.4) or a number of cells (80);
      -- nil: 0.4 right, 0.3 bottom, 0.8 float
      size = nil,
      split = nil, -- an Ex command that opens the window instead ('botright split')
      -- :QwenEnv's syntax: 'auto' (PowerShell on Windows; else fish or a
      -- POSIX shell after $SHELL), 'posix', 'fish', 'powershell' or 'cmd'
      shell = 'auto',
    },
  }
end

local function optional(kind)
  return function(v)
    return v == nil or type(v) == kind
  end, 'nil or ' .. kind
end

local function positive_int(v)
  return v == nil or (type(v) == 'number' and v >= 0 and v == math.floor(v))
end

local function cmd_value(v)
  if v == nil then
    return true
  end
  if type(v) == 'string' then
    return v ~= ''
  end
  if type(v) ~= 'table' or #v == 0 then
    return false
  end
  for k, a in pairs(v) do
    if type(k) ~= 'number' or type(a) ~= 'string' then
      return false
    end
  end
  return true
end

-- key -> { validator, message } (`optional(kind)` expands to both), per table.
--- The values of the `cli` option.
M.CLIS = { 'qwen', 'gemini', 'both' }

local function cli_value(v)
  return v == nil or vim.tbl_contains(M.CLIS, v)
end

--- Checks a `cli` value (setup's, or vim.g.qwen_companion_cli): returns it,
--- or nil and a message naming the value and the accepted ones.
function M.check_cli(v, where)
  if v ~= nil and cli_value(v) then
    return v
  end
  return nil, string.format("%s: expected 'qwen', 'gemini' or 'both', got %s", where or 'cli', vim.inspect(v))
end

local TOP = {
  lib = { optional('string') },
  lock_dir = { optional('string') },
  cli = { cli_value, "nil, 'qwen', 'gemini' or 'both'" },
  gemini_dir = { optional('string') },
  gemini_command = { cmd_value, 'nil, a non-empty string or a list of strings' },
  autostart = { optional('boolean') },
  ide_name = { optional('string') },
  ide_id = { optional('string') },
  debounce_ms = { positive_int, 'nil or a whole number of ms' },
  max_wait_ms = { positive_int, 'nil or a whole number of ms' },
  trusted = { optional('boolean') },
  request_timeout_ms = { positive_int, 'nil or a whole number of ms' },
  diffs = { optional('boolean') },
  plugins = { optional('table') },
  register_mcp = { optional('boolean') },
  editor_tools = { optional('boolean') },
  download_url = { optional('string') },
  terminal = { optional('table') },
}
local PLUGINS = {
  enabled = { optional('boolean') },
  dir = { optional('string') },
  node = { optional('string') },
  mcp = { optional('boolean') },
  always_load_tools = { optional('boolean') },
}
local TERMINAL = {
  cmd = { cmd_value, 'nil, a non-empty string or a list of strings' },
  split = { optional('string') },
  position = {
    function(v)
      return v == nil or v == 'right' or v == 'bottom' or v == 'float'
    end,
    "nil, 'right', 'bottom' or 'float'",
  },
  size = {
    function(v)
      return v == nil or (type(v) == 'number' and v > 0)
    end,
    'nil, a fraction (0 < size < 1) or a number of cells',
  },
  shell = {
    function(v)
      return v == nil or v == 'auto' or vim.tbl_contains(require('qwen_companion.platform').SHELLS, v)
    end,
    "nil, 'auto', 'posix', 'fish', 'powershell' or 'cmd'",
  },
}

local function check(prefix, spec, t)
  for k in pairs(t) do
    if spec[k] == nil then
      local known = vim.tbl_keys(spec)
      table.sort(known)
      error(string.format('qwen_companion.setup: unknown option %s%s (known: %s)', prefix, tostring(k),
        table.concat(known, ', ')), 0)
    end
  end
  local args = {}
  for k, s in pairs(spec) do
    args[prefix .. k] = { t[k], s[1], s[2] }
  end
  local ok, err = pcall(vim.validate, args)
  if not ok then
    error('qwen_companion.setup: ' .. tostring(err):gsub('^.-:%d+: ', ''), 0)
  end
end

--- Raises a clear error when `opts` has an unknown key or a value of the
--- wrong type (checked before anything is changed).
function M.validate(opts)
  if opts == nil then
    return
  end
  if type(opts) ~= 'table' then
    error('qwen_companion.setup: expected a table of options, got ' .. type(opts), 0)
  end
  check('', TOP, opts)
  if opts.plugins then
    check('plugins.', PLUGINS, opts.plugins)
  end
  if opts.terminal then
    check('terminal.', TERMINAL, opts.terminal)
  end
end

--- `base` with `opts` merged in (nested tables merged key by key).
function M.merge(base, opts)
  return vim.tbl_deep_extend('force', base, opts or {})
end

return M
