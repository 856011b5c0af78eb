-- :checkhealth qwen_companion
--
-- Reports LuaJIT and its ffi module, the library (which path, found how,
-- its version and ABI against the plugin's), the lock directory, Qwen
-- Code's `ide.enabled` in the user's settings.json (read like Qwen Code
-- reads it: comments allowed, trailing commas not), Gemini CLI's in
-- ~/.gemini/settings.json when the companion serves it (setup{ cli }), the
-- plugin host and its MCP registration, the running companion (the CLIs it
-- serves and their discovery files), and `qwen` and `node` against the
-- versions the library was tested with (qwen_companion.requirements; the
-- library's report checks `gemini` when it is served).

local M = {}
local platform = require('qwen_companion.platform')

-- vim.health (0.10: start/ok/...; 0.8/0.9: report_*), else 0.7's `health`.
local function reporter()
  local h = vim.health
  if h == nil or (h.start == nil and h.report_start == nil) then
    h = require('health')
  end
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    info = h.info or h.report_info,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
  }
end

--- Decodes JSON with comments (`//`, `/* */`), as Qwen Code reads its
--- settings files (it refuses trailing commas, and so does this). Returns
--- the value, or nil and a message.
function M.parse_jsonc(text)
  local out, i, n = {}, 1, #text
  if text:sub(1, 3) == '\239\187\191' then
    i = 4 -- UTF-8 BOM
  end
  while i <= n do
    local c = text:sub(i, i)
    if c == '"' then
      local j = i + 1
      while j <= n do
        local d = text:sub(j, j)
        if d == '\\' then
          j = j + 2
        elseif d == '"' then
          break
        else
          j = j + 1
        end
      end
      if j > n then
        return nil, 'unterminated string'
      end
      out[#out + 1] = text:sub(i, j)
      i = j + 1
    elseif c == '/' and text:sub(i + 1, i + 1) == '/' then
      local j = text:find('\n', i, true)
      i = j or n + 1
    elseif c == '/' and text:sub(i + 1, i + 1) == '*' then
      local j = text:find('*/', i + 2, true)
      if not j then
        return nil, 'unterminated comment'
      end
      out[#out + 1] = ' '
      i = j + 2
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  local clean = table.concat(out)
  if clean:match('^%s*$') then
    return vim.empty_dict()
  end
  local ok, v = pcall(vim.json.decode, clean)
  if not ok then
    return nil, tostring(v)
  end
  return v
end

--- The settings file Qwen Code reads for the user: $QWEN_HOME/settings.json,
--- else ~/.qwen/settings.json.
function M.settings_path()
  return require('qwen_companion.platform').join(require('qwen_companion.plugins').qwen_home(), 'settings.json')
end

--- Whether IDE mode is on in `path`: true, false (with a reason), or nil
--- and a message when the file cannot be read as Qwen Code reads it.
function M.ide_enabled(path)
  local f = io.open(path, 'rb')
  if not f then
    return false, 'no ' .. path
  end
  local text = f:read('*a')
  f:close()
  local v, err = M.parse_jsonc(text)
  if v == nil then
    return nil, path .. ': ' .. err
  end
  if type(v) ~= 'table' then
    return nil, path .. ': not a JSON object'
  end
  local ide = v.ide
  if type(ide) == 'table' and ide.enabled ~= nil then
    return ide.enabled == true, 'ide.enabled is ' .. tostring(ide.enabled)
  end
  if v.ideMode ~= nil then -- the old (v1) key, migrated by Qwen Code to ide.enabled
    return v.ideMode == true, 'ideMode (old key) is ' .. tostring(v.ideMode)
  end
  return false, 'ide.enabled is not set'
end

--- The settings file Gemini CLI reads for the user:
--- $GEMINI_CLI_HOME/.gemini/settings.json, else ~/.gemini/settings.json.
function M.gemini_settings_path()
  local home = os.getenv('GEMINI_CLI_HOME')
  if not home or home == '' then
    home = vim.fn.expand('~')
  end
  return platform.join(platform.join(home, '.gemini'), 'settings.json')
end

--- The `Gemini CLI settings` section: IDE mode in Gemini CLI's settings
--- when the companion serves it (`cli`), else how to serve it.
-- One CLI's IDE mode in its settings.json (`path`): ok, off (a warning with
-- the fix, run in `program`) or unreadable (an error naming the CLI).
local function report_ide_mode(r, path, program, off_prefix, name)
  local on, why = M.ide_enabled(path)
  if on then
    r.ok(string.format('IDE mode is on in %s (%s)', path, why))
  elseif on == false then
    r.warn(string.format('%sIDE mode is off: %s', off_prefix, why), {
      'run `/ide enable` in ' .. program .. ', or add "ide": {"enabled": true} to ' .. path,
    })
  else
    r.error(name .. ' cannot read its settings: ' .. why)
  end
end

function M.check_gemini_settings(r, cli)
  r.start('Gemini CLI settings')
  if cli ~= 'gemini' and cli ~= 'both' then
    r.info(string.format("Gemini CLI is not served (cli = '%s'): setup{ cli = 'gemini' } or 'both' serves it"
      .. ' (Gemini CLI %s)', tostring(cli or 'qwen'), require('qwen_companion.requirements').GEMINI_CLI_TESTED))
    return
  end
  report_ide_mode(r, M.gemini_settings_path(), 'gemini', 'Gemini CLI ', 'Gemini CLI')
end

--- The lock directory the companion writes to.
function M.lock_dir()
  local qc = require('qwen_companion')
  local dir = qc.config.lock_dir or vim.g.qwen_companion_lock_dir
  if type(dir) == 'string' and dir ~= '' then
    return vim.fn.expand(dir), 'setup{ lock_dir }'
  end
  local home = os.getenv('QWEN_HOME')
  if home and home ~= '' then
    return platform.join(require('qwen_companion.plugins').qwen_home(), 'ide'), '$QWEN_HOME/ide'
  end
  return platform.join(platform.join(vim.fn.expand('~'), '.qwen'), 'ide'), '~/.qwen/ide'
end

--- Runs `argv` (a --version query) with a time limit; returns its output
--- (stdout and stderr, trimmed) or nil and a message.
function M.version_output(argv, timeout_ms)
  if vim.fn.executable(argv[1]) ~= 1 then
    return nil, 'not found'
  end
  local out, collect = require('qwen_companion.install').line_collector()
  local ok, job = pcall(vim.fn.jobstart, argv, { on_stdout = collect, on_stderr = collect })
  if not ok or job <= 0 then
    return nil, 'cannot run ' .. argv[1]
  end
  local code = vim.fn.jobwait({ job }, timeout_ms or 15000)[1]
  if code == -1 then
    pcall(vim.fn.jobstop, job)
    return nil, table.concat(argv, ' ') .. ' did not answer within ' .. math.floor((timeout_ms or 15000) / 1000) .. ' s'
  end
  collect()
  local text = vim.trim(table.concat(out, '\n'))
  if code ~= 0 then
    return nil, string.format('%s exited with %d: %s', table.concat(argv, ' '), code, text)
  end
  return text
end

--- The `Qwen Code and Node.js` section: each found in PATH (`node`: the
--- plugins.node setting when set) and its version against requirements.
function M.check_programs(r, node_cmd)
  local req = require('qwen_companion.requirements')
  local install = req.qwen_install_command()
  r.start('Qwen Code and Node.js')

  local node = node_cmd or 'node'
  local nout, nerr = M.version_output({ node, '--version' })
  local nv = nout and req.parse_version(nout)
  if not nout then
    r.error(string.format('%s: %s (Qwen Code needs Node.js %d or later; the plugin host runs plugins with it)',
      node, nerr, req.NODE_MIN_MAJOR), { 'install Node.js ' .. req.NODE_MIN_MAJOR .. ' or later from https://nodejs.org (or your package manager)' })
  elseif not nv then
    r.warn(string.format('%s --version printed %q: not a version', node, nout))
  elseif nv[1] < req.NODE_MIN_MAJOR then
    r.error(string.format('%s is Node.js %s: Qwen Code %s needs Node.js %d or later', vim.fn.exepath(node), nout,
      req.QWEN_CODE_TESTED, req.NODE_MIN_MAJOR), { 'install Node.js ' .. req.NODE_MIN_MAJOR .. ' or later from https://nodejs.org' })
  else
    r.ok(string.format('node %s (%s); Qwen Code needs %d or later', nout, vim.fn.exepath(node), req.NODE_MIN_MAJOR))
  end

  local qout, qerr = M.version_output({ 'qwen', '--version' })
  local qv = qout and req.parse_version(qout)
  local tested = req.parse_version(req.QWEN_CODE_TESTED)
  if not qout then
    r.warn('qwen (the Qwen Code CLI): ' .. qerr .. '; the companion waits for a qwen started in a terminal',
      { 'install it: ' .. install })
  elseif not qv then
    r.warn(string.format('qwen --version printed %q: not a version (tested with %s)', qout, req.QWEN_CODE_TESTED))
  else
    local c = req.compare(qv, tested)
    local where = vim.fn.exepath('qwen')
    if c == 0 then
      r.ok(string.format('qwen %s (%s): the version the library was tested with', qout, where))
    elseif c > 0 then
      r.ok(string.format('qwen %s (%s): newer than %s, the version the library was tested with', qout, where,
        req.QWEN_CODE_TESTED))
    else
      r.warn(string.format('qwen %s (%s) is older than %s, the version the library was tested with', qout, where,
        req.QWEN_CODE_TESTED), { 'update it: ' .. install })
    end
  end
end

--- The `Library report` section: each check of qc_health_json (the
--- library's own view: qwen, node, lock file, CLIs, plugin MCP server,
--- participant) as ok / warn / error / info ("off"), detail as advice.
function M.check_report(r, report, err)
  r.start('Library report')
  local why
  if report == nil and err == nil then
    report, err, why = require('qwen_companion.health_report').library_report()
  end
  if not report then
    if why == 'missing' then
      r.warn(tostring(err), { 'install the current library: :QwenInstall' })
    else
      r.error('no report: ' .. tostring(err))
    end
    return
  end
  local lib = type(report.library) == 'table' and report.library or {}
  r.info(string.format('library %s, ABI %s, %s', tostring(lib.version), tostring(lib.abi), tostring(lib.platform)))
  local levels = { ok = r.ok, warn = r.warn, error = r.error, off = r.info }
  for _, c in ipairs(type(report.checks) == 'table' and report.checks or {}) do
    local fn = levels[c.status] or r.warn
    local detail = type(c.detail) == 'string' and c.detail ~= '' and { c.detail } or nil
    local text = string.format('%s: %s', tostring(c.id), tostring(c.summary))
    if c.status == 'off' then
      text = text .. ' (off)'
    end
    if fn == r.info then
      fn(text .. (detail and ('\n' .. detail[1]) or ''))
    elseif detail then
      fn(text, detail)
    else -- no advice argument at all: Neovim 0.7's health#report_* refuses a nil one
      fn(text)
    end
  end
end

function M.check()
  local r = reporter()
  local capi = require('qwen_companion.capi')
  local qc = require('qwen_companion')

  r.start('LuaJIT and ffi')
  local has_ffi, ffi = pcall(require, 'ffi')
  if type(jit) == 'table' and has_ffi and ffi then
    r.ok(string.format('%s with the ffi module (%s %s)', jit.version, jit.os, jit.arch))
  else
    r.error('this Neovim is not built with LuaJIT (no ffi module): qwen_companion cannot load the library',
      { 'use a Neovim build with LuaJIT (the official builds and Debian/Ubuntu packages are)' })
    return
  end

  r.start('Library')
  local path, origin = capi.library_path(qc.config.lib)
  r.info(string.format('path: %s (from %s); on %s the library file is %s', path, origin, jit.os, capi.library_file_name()))
  if origin == 'next to the plugin' or origin == "the dynamic linker's search path" then
    r.info('looked for ' .. capi.library_file_name() .. ' in: ' .. table.concat(capi.bundled_library_candidates(), ', '))
  end
  if platform.is_absolute(path) and vim.fn.filereadable(path) == 0 then
    r.error('no library at ' .. path, { 'install it: :QwenInstall (or :QwenInstall source to build it with cargo)' })
  end
  local lib, err = capi.load(path)
  if lib then
    r.ok(string.format('loaded: version %s, ABI %d (the plugin needs ABI %d)', ffi.string(lib.qc_version()),
      tonumber(lib.qc_abi_version()), capi.ABI_VERSION))
  else
    r.error(err, {
      'install it: :QwenInstall (the prebuilt library of this platform), or :QwenInstall source (cargo)',
      "or point setup{ lib = '/path/to/" .. capi.library_file_name() .. "' } at it",
    })
  end

  local bridge = lib and require('qwen_companion.plugins').bridge_next_to(path)
  if bridge and vim.fn.filereadable(bridge) == 1 then
    r.ok('plugin tools bridge: ' .. bridge)
  elseif bridge then
    r.warn('no ' .. platform.bridge_file_name() .. ' next to the library (' .. bridge .. '): plugin tools cannot reach Qwen Code',
      { 'install both: :QwenInstall' })
  end
  if platform.event_watch_method() == 'timer' then
    r.info(string.format('events: libuv cannot watch a Windows event handle, so a timer takes them every %d ms',
      platform.WINDOWS_EVENT_INTERVAL_MS))
  end

  r.start('Lock directory')
  local dir, dorigin = M.lock_dir()
  local st = (vim.uv or vim.loop).fs_stat(dir)
  if st and st.type == 'directory' then
    local mode = string.format('%o', bit.band(st.mode, tonumber('777', 8)))
    if vim.fn.filewritable(dir) == 2 then
      r.ok(string.format('%s (%s), mode %s', dir, dorigin, mode))
    else
      r.error(dir .. ' is not writable: the companion cannot write its lock file')
    end
  elseif st then
    r.error(dir .. ' exists but is not a directory')
  else
    r.info(string.format('%s (%s) does not exist yet: the companion creates it (0700) on start', dir, dorigin))
  end

  r.start('Qwen Code settings')
  report_ide_mode(r, M.settings_path(), 'qwen', '', 'Qwen Code')

  M.check_gemini_settings(r, qc.cli())

  M.check_programs(r, qc.config.plugins and qc.config.plugins.node)

  M.check_report(r)

  r.start('Companion')
  local s = qc.status()
  if not s then
    r.info('not running (:QwenStart, or setup{ autostart = true })')
    return
  end
  r.ok(string.format('running on 127.0.0.1:%d for %s, lock file %s', s.port, s.root, tostring(s.lock_file)))
  for _, l in ipairs(require('qwen_companion.health_report').served_lines(s, '')) do
    r.info(l)
  end
  r.info(string.format('connected CLIs: %s', tostring(s.clients)))
  if s.last_error then
    r.warn('last error: ' .. tostring(s.last_error))
  end
  local p = s.plugins
  if p.running then
    r.ok('plugin host: ' .. tostring(p.dir))
    if p.mcp then
      r.ok(string.format('plugins MCP server: %s, tools: %s', p.mcp.url, table.concat(p.mcp.tools or {}, ', ')))
    elseif p.mcp_error then
      r.warn('plugins MCP server: ' .. tostring(p.mcp_error))
    end
    if p.registration then
      r.ok(string.format('registered as %s in %s (%s)', tostring(p.registration.serverName),
        tostring(p.registration.settings), tostring(p.registration.change)))
    elseif p.register_error then
      r.warn('not registered with Qwen Code: ' .. tostring(p.register_error))
    end
  elseif p.error then
    r.warn('plugin host: ' .. tostring(p.error))
  else
    r.info('plugin host disabled (plugins.enabled = false)')
  end
end

return M
