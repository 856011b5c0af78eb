-- qwen_companion.plugins: the plugin host started next to the companion,
-- its MCP server (the plugins' tools as MCP tools of `qwen-companion-plugins`)
-- and the `mcpServers` entry of Qwen Code's user settings.
--
-- Pull mode, like the companion: the host's events and capability requests
-- (`host_request`: show_notification, the editor tools of
-- qwen_companion.editor_tools) are queued by the library, a
-- vim.uv poll handle watches the host's event fd on the main loop, and every
-- request is answered with qc_plugin_host_respond. No Lua function is ever
-- a C callback.
--
-- The host object (require('qwen_companion').plugin_host()):
--   host.lib, host.h                the library namespace and the qc_plugin_host *
--   host.dir                        the plugins directory in use
--   host.mcp                        qc_plugin_host_mcp_info (decoded) or nil; host.mcp_error
--   host.registration               qc_mcp_register's answer (decoded) or nil; host.register_error
--   host.editor_tools               true when the editor tools are offered; host.editor_tools_error
--   host:call(fn_name, ...)         capi.call(lib, fn_name, h, ...)
--   host:list()                     the installed plugins (decoded), or nil, message, status, error_json
--   host:on_event(fn)               fn(event) on the main loop for every event
--                                   (host_request ones included); returns a remover
--   host:handle(capability, fn)     answers `capability` requests: fn(request) returns
--                                   a result (a Lua value, sent as JSON), or nil and
--                                   a message (the plugin gets host_error), or
--                                   host.LATER (answer later with host:respond)
--   host:respond(id, result, err)   answers a request now
--   host:terminal_env()             the variables a terminal needs for the MCP server

local ffi = require('ffi')
local capi = require('qwen_companion.capi')
local platform = require('qwen_companion.platform')

local uv = vim.uv or vim.loop

local M = {}

local Host = {}
Host.__index = Host

--- Returned by a capability handler that answers later (host:respond).
Host.LATER = setmetatable({}, {
  __tostring = function()
    return 'qwen_companion.plugins.LATER'
  end,
})
M.LATER = Host.LATER

--- The server name of the plugins' MCP server in Qwen Code's settings.
M.SERVER_NAME = 'qwen-companion-plugins'

--- Qwen Code's home: $QWEN_HOME, else ~/.qwen.
function M.qwen_home()
  local h = os.getenv('QWEN_HOME')
  if h and h ~= '' then
    return (vim.fn.fnamemodify(vim.fn.expand(h), ':p'):gsub('([^:/\\])[/\\]$', '%1'))
  end
  return platform.join(vim.fn.expand('~'), '.qwen')
end

function Host:call(name, ...)
  return capi.call(self.lib, name, self.h, ...)
end

function Host:list()
  local json, err, st, ej = capi.out_string_ej(self.lib, 'qc_plugin_host_list', self.h)
  if not json then
    return nil, err, st, ej
  end
  return vim.json.decode(json)
end

function Host:on_event(fn)
  assert(type(fn) == 'function', 'on_event(fn): fn must be a function')
  local key = {}
  self.listeners[key] = fn
  self.order[#self.order + 1] = key
  return function()
    self.listeners[key] = nil
  end
end

function Host:handle(capability, fn)
  assert(type(capability) == 'string' and capability ~= '', 'handle(capability, fn): capability must be a name')
  assert(type(fn) == 'function', 'handle(capability, fn): fn must be a function')
  if not self.handlers[capability] then
    local ok, err = self:call('qc_plugin_host_offer_capability', capability)
    if not ok then
      return nil, err
    end
  end
  self.handlers[capability] = fn
  return true
end

function Host:respond(id, result, err_message)
  if self.freed then
    return nil, 'the plugin host is stopped'
  end
  local json = nil
  if err_message == nil then
    json = vim.json.encode(result == nil and vim.NIL or result)
  end
  local ok, err, st = self:call('qc_plugin_host_respond', ffi.new('uint64_t', id), json, err_message)
  if not ok then
    self.last_error = err
  end
  return ok, err, st
end

function Host:terminal_env()
  return vim.deepcopy(self.mcp and self.mcp.env or {})
end

-- Runs on the main loop (scheduled): answers one host_request.
local function answer(host, ev)
  if host.freed then
    return
  end
  local fn = host.handlers[ev.capability]
  if not fn then
    host:respond(ev.id, nil, 'Neovim does not offer ' .. tostring(ev.capability))
    return
  end
  local ok, result, msg = pcall(fn, ev)
  if not ok or result == nil then
    require('qwen_companion.log').write('WARN', 'plugins', string.format('%s request %s failed: %s',
      tostring(ev.capability), tostring(ev.id), tostring(ok and msg or result)))
  end
  if not ok then
    host:respond(ev.id, nil, 'Neovim failed to handle ' .. tostring(ev.capability) .. ': ' .. tostring(result))
  elseif result == Host.LATER then
    return
  elseif result == nil then
    host:respond(ev.id, nil, msg or (tostring(ev.capability) .. ' failed'))
  else
    host:respond(ev.id, result)
  end
end

-- What the log file gets for a plugin host event (nil: nothing).
local function log_event(ev)
  local log = require('qwen_companion.log')
  if log.event('plugins', ev) then
    return true
  end
  if ev.type == 'plugin_started' then
    log.write('INFO', 'plugins', 'plugin ' .. tostring(ev.plugin) .. ' started')
  elseif ev.type == 'plugin_exit' then
    local how = type(ev.signal) == 'string' and ('signal ' .. ev.signal) or ('code ' .. tostring(ev.code))
    local tail = type(ev.stderrTail) == 'string' and ev.stderrTail ~= '' and (': ' .. ev.stderrTail) or ''
    log.write(ev.expected == true and 'INFO' or 'WARN', 'plugins',
      string.format('plugin %s exited (%s)%s', tostring(ev.plugin), how, tail))
  elseif ev.type == 'plugin_disabled' then
    log.write('ERROR', 'plugins', string.format('plugin %s disabled: %s', tostring(ev.plugin), tostring(ev.reason)))
  elseif ev.type == 'host_request' then
    log.write('DEBUG', 'plugins', string.format('%s request %s from %s', tostring(ev.capability), tostring(ev.id),
      ev.plugin ~= nil and ev.plugin ~= vim.NIL and tostring(ev.plugin) or tostring(ev.from or 'mcp')))
  end
  return false
end

local function dispatch(host, ev)
  if host.freed then
    return
  end
  if log_event(ev) then
    return -- a library log line: nothing else to do
  end
  host.events = host.events + 1
  if ev.type == 'plugin_disabled' then
    host.last_error = string.format('plugin %s disabled: %s', tostring(ev.plugin), tostring(ev.reason))
  end
  for _, key in ipairs(host.order) do
    local fn = host.listeners[key]
    if fn then
      local ok, err = pcall(fn, ev)
      if not ok then
        host.last_error = 'event listener: ' .. tostring(err)
      end
    end
  end
  if ev.type == 'host_request' and type(ev.id) == 'number' then
    answer(host, ev)
  end
end

local function unwatch(host)
  if host.poll then
    host.poll:stop()
    if not host.poll:is_closing() then
      host.poll:close()
    end
    host.poll = nil
  end
end

-- The event fd is readable (fast context): pull everything, schedule the work.
local function drain(host)
  while not host.freed do
    local json, err = capi.out_string(host.lib, 'qc_plugin_host_next_event', host.h)
    if json == nil then
      if err then
        host.last_error = err
        unwatch(host)
      end
      return
    end
    local ok, ev = pcall(vim.json.decode, json)
    if ok and type(ev) == 'table' then
      vim.schedule(function()
        dispatch(host, ev)
      end)
    else
      host.last_error = 'bad plugin host event: ' .. tostring(ev)
    end
  end
end

--- show_notification (seed: {title, body, viewId?}) as vim.notify; with the
--- view server, the request also carries `view = {id, title, url}`.
function M.show_notification(req)
  local p = type(req.params) == 'table' and req.params or {}
  local title = type(p.title) == 'string' and p.title or ''
  local body = type(p.body) == 'string' and p.body or ''
  local text = title
  if body ~= '' then
    text = title ~= '' and (title .. '\n' .. body) or body
  end
  if text == '' then
    return nil, 'show_notification needs a title or a body'
  end
  local view = type(p.view) == 'table' and p.view or nil
  if view and type(view.url) == 'string' then
    text = text .. '\n(view: ' .. view.url .. ')'
  end
  vim.notify(string.format('[%s] %s', tostring(req.plugin), text), vim.log.levels.INFO, { title = 'Qwen plugin' })
  return { shown = true }
end

--- Copies the bridge to <qwen home>/companion/bin/qc-mcp-bridge (.exe on
--- Windows; the settings entry names that stable path, so moving or
--- rebuilding the plugin never breaks it). The copy keeps the source's
--- modification time; it is made again only when size or time differ.
--- Windows cannot overwrite a bridge a running qwen has started, but can
--- rename it: there the old one is moved aside (`<name>.old-<pid>`) and
--- removed once it is free. Returns the copy's path, or nil and a message.
function M.install_bridge(src, qwen_home, os_name)
  local name = platform.bridge_file_name(os_name)
  local sst = uv.fs_stat(src)
  if not sst or sst.type ~= 'file' then
    return nil, 'no ' .. name .. ' at ' .. src .. ' (install it with the library: :QwenInstall)'
  end
  local dir = platform.join(platform.join(qwen_home, 'companion', os_name), 'bin', os_name)
  local dst = platform.join(dir, name, os_name)
  local dst_st = uv.fs_stat(dst)
  if dst_st and dst_st.size == sst.size and dst_st.mtime.sec == sst.mtime.sec and uv.fs_access(dst, 'X') then
    return dst
  end
  if vim.fn.isdirectory(dir) == 0 and vim.fn.mkdir(dir, 'p', tonumber('700', 8)) == 0 then
    return nil, 'cannot create ' .. dir
  end
  local function remove_old()
    for _, old in ipairs(vim.fn.glob(vim.fn.fnameescape(dst) .. '.old-*', true, true)) do
      os.remove(old) -- fails while that bridge still runs: a later install removes it
    end
  end
  remove_old()
  local tmp = platform.join(dir, string.format('.%s.%d.tmp', name, uv.os_getpid()), os_name)
  local ok, err = uv.fs_copyfile(src, tmp)
  if ok then
    ok, err = uv.fs_chmod(tmp, tonumber('700', 8)) -- user-only, as every editor installs it
  end
  if ok then
    ok, err = uv.fs_utime(tmp, sst.atime.sec, sst.mtime.sec)
  end
  if ok then
    ok, err = uv.fs_rename(tmp, dst)
    if not ok and platform.is_windows(os_name) and dst_st then
      local aside = string.format('%s.old-%d', dst, uv.os_getpid())
      ok, err = uv.fs_rename(dst, aside)
      if ok then
        ok, err = uv.fs_rename(tmp, dst)
        remove_old()
      end
    end
  end
  if not ok then
    os.remove(tmp)
    return nil, 'cannot install ' .. dst .. ': ' .. tostring(err)
  end
  return dst
end

--- The `qc-mcp-bridge` (.exe on Windows) built next to the library at
--- `libpath` (absolute), or nil.
function M.bridge_next_to(libpath, os_name)
  if not platform.is_absolute(libpath, os_name) then
    return nil
  end
  return platform.join(platform.dirname(libpath, os_name), platform.bridge_file_name(os_name), os_name)
end

--- Starts a plugin host (pull mode, show_notification and the editor tools
--- answered, MCP server started, entry registered). `opts`: lib, libpath,
--- dir, node, root, mcp (bool), register (bool), always_load_tools,
--- mcp_config (table), editor_tools (bool, default true).
--- Returns the host, or nil and a message. MCP and registration failures do
--- not fail the host: they are kept in host.mcp_error / host.register_error.
function M.start(opts)
  local lib = opts.lib
  local config = {
    pluginsDir = opts.dir and vim.fn.expand(opts.dir) or nil,
    node = opts.node,
    workspaceRoot = opts.root,
  }
  local out = ffi.new('qc_plugin_host *[1]')
  local ok, err = capi.call(lib, 'qc_plugin_host_new', vim.json.encode(config), out)
  if not ok then
    return nil, err
  end
  local host = setmetatable({
    lib = lib,
    h = out[0],
    listeners = {},
    order = {},
    handlers = {},
    events = 0,
    freed = false,
  }, Host)
  host.dir = capi.out_string(lib, 'qc_plugin_host_plugins_dir', host.h)

  local fd = ffi.new('int32_t[1]')
  ok, err = host:call('qc_plugin_host_enable_events', fd)
  if ok then
    -- The library's log lines arrive as `log` events (written to the log file).
    local lok, lerr = capi.optional_call(lib, 'qc_plugin_host_enable_log_events', host.h, capi.log.INFO)
    if not lok then
      host.last_error = lerr
    end
    host.event_fd = tonumber(fd[0])
    -- a poll on the descriptor, or a timer on Windows (platform.watch_events)
    local watch, werr = platform.watch_events(host.event_fd, function(e)
      if e then
        host.last_error = 'plugin host event fd: ' .. tostring(e)
      end
      local dok, derr = pcall(drain, host)
      if not dok then
        host.last_error = derr
      end
    end)
    if watch then
      host.poll = watch
    else
      ok, err = nil, 'cannot watch the plugin host events: ' .. tostring(werr)
    end
  end
  if ok then
    ok, err = host:handle('show_notification', M.show_notification)
  end
  if not ok then
    M.stop(host)
    return nil, err
  end
  if opts.editor_tools ~= false then
    -- Before the MCP server starts: Qwen Code reads its tool list once.
    local tok, terr = require('qwen_companion.editor_tools').offer(host)
    host.editor_tools = tok and true or false
    host.editor_tools_error = terr
  end

  if opts.mcp ~= false then
    local mcfg = vim.tbl_extend('keep', opts.mcp_config or {}, { workspacePaths = { opts.root } })
    local mok, merr = host:call('qc_plugin_host_mcp_start', vim.json.encode(mcfg))
    if mok then
      local info
      info, merr = capi.out_string(lib, 'qc_plugin_host_mcp_info', host.h)
      host.mcp = info and vim.json.decode(info) or nil
    end
    host.mcp_error = host.mcp == nil and merr or nil
  end
  if opts.register then
    host.registration, host.register_error = M.register(lib, opts.libpath, opts.always_load_tools)
  end
  return host
end

--- Writes the `qwen-companion-plugins` entry in the user's settings
--- (<qwen home>/settings.json) once: the library leaves the file untouched
--- when the entry is already the same ("change":"unchanged").
--- Returns the decoded answer, or nil and a message.
function M.register(lib, libpath, always_load_tools)
  local src = M.bridge_next_to(libpath)
  if not src then
    return nil, 'cannot find ' .. platform.bridge_file_name() .. ': the library was loaded by name (' .. tostring(libpath)
      .. '); set setup{ lib = "/abs/path/' .. platform.library_file_name() .. '" }'
  end
  local bridge, berr = M.install_bridge(src, M.qwen_home())
  if not bridge then
    return nil, berr
  end
  local options = { scope = 'user', bridge = bridge, alwaysLoadTools = always_load_tools }
  local json, err = capi.out_string(lib, 'qc_mcp_register', vim.json.encode(options))
  if not json then
    return nil, err
  end
  return vim.json.decode(json)
end

--- Removes the entry from the user's settings. Returns the decoded answer,
--- or nil and a message.
function M.unregister(lib)
  local json, err = capi.out_string(lib, 'qc_mcp_unregister', vim.json.encode({ scope = 'user' }))
  if not json then
    return nil, err
  end
  return vim.json.decode(json)
end

--- Frees the host: ends its plugins, stops its MCP server (lock file
--- removed), answers waiting requests with an error.
function M.stop(host)
  if not host or host.freed then
    return
  end
  unwatch(host) -- before the free closes the fd
  host.freed = true
  host.lib.qc_plugin_host_free(host.h)
  host.h = nil
end

return M
