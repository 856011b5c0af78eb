-- qwen_companion.plugins_ui: the plugins of the plugin host in Neovim.
--
--   :QwenPlugin list                      the plugin manager (a buffer)
--   :QwenPlugin install PATH              a plugin folder or .zip
--   :QwenPlugin uninstall ID              (data kept; `:QwenPlugin! uninstall ID` removes it)
--   :QwenPlugin enable|disable ID
--   :QwenPlugin run [ID [TOOL]]           commands, menus, the session action
--   :QwenPlugin config [ID [KEY]]         configuration (select / boolean / string / number)
--   :QwenPlugin view [ID [VIEW]]          a view in the browser (no ID: the last notification's)
--   :QwenPlugin panel [ID]                the plugin's panel in the browser
--   :QwenPlugin parse [MIME]              the current file through a document parser
--
-- The host is the core's (`require('qwen_companion').plugin_host()`); every
-- call is made on Neovim's main thread. Results: a checklist (`renderAs:
-- "checklist"`) in a scratch buffer with status marks, a file card
-- (`details.filePath`) opened with :edit, other text in a scratch buffer.
-- Notifications of plugins (`show_notification`) are vim.notify messages;
-- when one names a view, `:QwenPlugin view` opens it. Views and panels are
-- pages of the library's view server (started when this module joins the
-- core's host), opened in the browser; their colour scheme follows
-- 'background'.
--
-- Options (require("qwen_companion.plugins_ui").setup{…}, or
-- vim.g.qwen_companion_browser): browser (nil: vim.ui.open, else xdg-open / open; a program name
-- or an argv list), keymaps (true: map the manifests' keybindings, e.g.
-- `mod+shift+d` → <C-S-d>, where the key is free).

local ffi = require('ffi')
local capi = require('qwen_companion.capi')
local ext = require('qwen_companion.capi_ext')
local model = require('qwen_companion.plugins_model')

local api = vim.api

local M = {}

M.config = {
  browser = nil,
  keymaps = true,
}

local state = { last_view = nil, mapped = {}, results = 0, calls = {} }
M._state = state

local notify = require('qwen_companion.notify')

---------------------------------------------------------------------------
-- The host
---------------------------------------------------------------------------

--- `{h = qc_plugin_host*, lib}` of the core's plugin host, or nil and a message.
function M.host()
  local core = require('qwen_companion')
  local h = core.plugin_host and core.plugin_host()
  if type(h) == 'table' then
    M.attach(h)
    h = h.h or h.handle
  end
  if h == nil then
    return nil, 'the plugin host is not running (:QwenStart starts it with the companion)'
  end
  local lib, err = ext.load(capi.library_path(core.config and core.config.lib))
  if not lib then
    return nil, err
  end
  return { h = h, lib = lib }
end

local function read_json(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local text = f:read('*a')
  f:close()
  local ok, v = pcall(vim.json.decode, text, { luanil = { object = true, array = true } })
  return ok and v or nil
end

--- Every installed plugin (`qc_plugin_host_list`), each with its `manifest`
--- (the library's, else the installed manifest.json) and its configuration
--- `values` (the plugins directory's state.json).
function M.list()
  local H, err = M.host()
  if not H then
    return nil, err
  end
  local list, lerr = ext.plugin_call(H.lib, 'qc_plugin_host_list', true, H.h)
  if not list then
    return nil, lerr
  end
  local dir = ext.out_string(H.lib, 'qc_plugin_host_plugins_dir', H.h)
  local st = dir and read_json(require('qwen_companion.platform').join(dir, 'state.json')) or {}
  for _, p in ipairs(list) do
    if p.manifest == nil and dir then
      p.manifest = read_json(table.concat({ dir, 'installed', p.id, 'manifest.json' }, require('qwen_companion.platform').is_windows() and '\\' or '/'))
    end
    p.manifest = p.manifest or {}
    p.values = (st.plugins and st.plugins[p.id] and st.plugins[p.id].config) or {}
  end
  return list
end

--- The installed plugin `id`, or nil and a message.
function M.plugin(id)
  local list, err = M.list()
  if not list then
    return nil, err
  end
  for _, p in ipairs(list) do
    if p.id == id then
      return p
    end
  end
  return nil, 'no plugin ' .. tostring(id) .. ' is installed (:QwenPlugin list)'
end

local function cwd()
  return vim.fn.getcwd(-1, -1)
end

-- A tool's arguments as a JSON object (an empty Lua table is `{}`, not `[]`).
local function params_json(params)
  if params == nil or next(params) == nil then
    return '{}'
  end
  return vim.json.encode(params)
end

--- Calls `tool` of plugin `id` (blocking, up to the host's call timeout).
--- Returns the result, or nil, a message and the error JSON.
function M.call(id, tool, params)
  local H, err = M.host()
  if not H then
    return nil, err
  end
  local res, cerr, _, detail = ext.plugin_call(H.lib, 'qc_plugin_host_call', true, H.h, id, tool,
    params_json(params), vim.json.encode({ cwd = cwd() }))
  if not res then
    return nil, cerr, detail
  end
  return res
end

--- Calls `tool` of plugin `id` without blocking Neovim when the core's
--- host object hands its events to this module (see attach): the call is queued
--- (qc_plugin_host_call_queued) and `done(result)` / `done(nil, message,
--- error_json)` runs when its `call_done` event arrives, so the plugin's
--- notifications are shown while it runs. Otherwise a blocking call.
function M.call_async(id, tool, params, done)
  local H, err = M.host()
  if not H then
    return done(nil, err)
  end
  if not (state.attached and not state.attached.freed) then
    return done(M.call(id, tool, params))
  end
  local cid = ffi.new('uint64_t[1]')
  local ok, qerr = capi.call(H.lib, 'qc_plugin_host_call_queued', H.h, id, tool,
    params_json(params), vim.json.encode({ cwd = cwd() }), cid)
  if not ok then
    return done(nil, qerr)
  end
  state.calls[tostring(cid[0]):gsub('ULL$', '')] = done
end

---------------------------------------------------------------------------
-- Scratch buffers and results
---------------------------------------------------------------------------

--- A scratch buffer named `name` (reused) showing `lines`, in a split.
function M.scratch(name, lines, opts)
  state.buffers = state.buffers or {}
  local b = state.buffers[name]
  if not (b and api.nvim_buf_is_valid(b)) then
    b = api.nvim_create_buf(true, true)
    state.buffers[name] = b
    api.nvim_buf_set_name(b, name)
    vim.bo[b].buftype, vim.bo[b].bufhidden, vim.bo[b].swapfile = 'nofile', 'hide', false
  end
  vim.bo[b].modifiable = true
  api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  if opts and opts.filetype then
    vim.bo[b].filetype = opts.filetype
  end
  local win = vim.fn.bufwinid(b)
  if win == -1 then
    vim.cmd('botright split')
    api.nvim_win_set_buf(0, b)
  else
    api.nvim_set_current_win(win)
  end
  return b
end

--- Shows a tool's result the way its manifest asks: checklist, file card, text.
function M.show_result(plugin, tool_name, result)
  state.results = state.results + 1
  local tool = model.tool(plugin.manifest, tool_name) or {}
  local kind = model.result_kind(tool, result)
  local title = string.format('%s: %s', plugin.name or plugin.id, tool.summary or tool_name)
  if kind == 'checklist' then
    return M.scratch('Qwen plugin: ' .. plugin.id .. ' ' .. tool_name, model.checklist_lines(title, result), { filetype = 'qwenchecklist' }), kind
  elseif kind == 'file' then
    local card = model.file_card(result)
    if vim.fn.filereadable(card.path) == 1 then
      vim.cmd('edit ' .. vim.fn.fnameescape(card.path))
      notify(string.format('%s: opened %s', plugin.name or plugin.id, card.name))
      return api.nvim_get_current_buf(), kind
    end
    notify(string.format('%s: the file %s does not exist', plugin.name or plugin.id, card.path), vim.log.levels.WARN)
  end
  local lines = model.text_lines(result)
  table.insert(lines, 1, title)
  return M.scratch('Qwen plugin: ' .. plugin.id .. ' ' .. tool_name, lines), kind
end

--- Runs `tool` of `plugin` (a list entry) and shows the result or the
--- error; `after(buf, kind)` (optional) runs once it is shown.
function M.run_tool(plugin, tool, after)
  M.call_async(plugin.id, tool, {}, function(res, err)
    if not res then
      notify(string.format('%s %s failed: %s', plugin.id, tool, tostring(err)), vim.log.levels.ERROR)
      return
    end
    local b, kind = M.show_result(plugin, tool, res)
    if after then
      after(b, kind)
    end
  end)
end

--- Whether the session action of `plugin` shows for the current folder
--- (its `visibleTool`); true when it has none; false on a failure.
function M.visible(plugin)
  local sa = plugin.manifest and plugin.manifest.sessionAction
  if not sa then
    return false
  end
  if not sa.visibleTool then
    return true
  end
  local H = M.host()
  if not H then
    return false
  end
  local out = ffi.new('int32_t[1]')
  local ok = ext.plugin_call(H.lib, 'qc_plugin_host_visible', false, H.h, plugin.id, cwd(), out)
  return ok == true and out[0] ~= 0
end

--- What can be run: every enabled plugin's actions (or `id`'s).
function M.actions(id)
  local list, err = M.list()
  if not list then
    return nil, err
  end
  local items = {}
  for _, p in ipairs(list) do
    if p.enabled ~= false and (id == nil or p.id == id) then
      local visible = p.manifest.sessionAction and M.visible(p)
      for _, a in ipairs(model.actions(p, jit.os, visible)) do
        a.entry = p
        items[#items + 1] = a
      end
    end
  end
  return items
end

function M.run_command(id, tool)
  if id and tool then
    local p, err = M.plugin(id)
    if not p then
      return notify(err, vim.log.levels.ERROR)
    end
    return M.run_tool(p, tool)
  end
  local items, err = M.actions(id)
  if not items then
    return notify(err, vim.log.levels.ERROR)
  end
  if #items == 0 then
    return notify('no plugin command to run' .. (id and (' for ' .. id) or ''), vim.log.levels.WARN)
  end
  vim.ui.select(items, {
    prompt = 'Run plugin command',
    format_item = function(it)
      return it.label
    end,
  }, function(it)
    if it then
      M.run_tool(it.entry, it.tool)
    end
  end)
end

---------------------------------------------------------------------------
-- Configuration
---------------------------------------------------------------------------

--- Sets configuration `key` of plugin `id` to the JSON text `value_json`
--- (`null` resets it). Returns true, or nil and a message.
function M.set_config(id, key, value_json)
  local H, err = M.host()
  if not H then
    return nil, err
  end
  return capi.call(H.lib, 'qc_plugin_host_set_config_value', H.h, id, key, value_json)
end

--- The select options of entry `key` ("Auto" first), or nil and a message.
function M.options(id, key)
  local H, err = M.host()
  if not H then
    return nil, err
  end
  return ext.plugin_call(H.lib, 'qc_plugin_host_options', true, H.h, id, key)
end

local function after_set(id, key, ok, err)
  if ok then
    notify(string.format('%s: %s set', id, key))
  else
    notify(string.format('%s: %s not changed: %s', id, key, tostring(err)), vim.log.levels.ERROR)
  end
end

--- Asks for a new value of configuration `entry` of plugin `p`.
function M.edit_config(p, entry)
  local cur = p.values[entry.id]
  if entry.type == 'select' then
    local options, err = M.options(p.id, entry.id)
    if not options then
      return notify(string.format('%s: no options for %s: %s', p.id, entry.id, tostring(err)), vim.log.levels.ERROR)
    end
    vim.ui.select(model.option_items(options, cur), {
      prompt = entry.label or entry.id,
      format_item = function(it)
        return it.label
      end,
    }, function(it)
      if it then
        -- Auto: no value of the user's (the entry's default applies).
        local json = it.auto and 'null' or vim.json.encode(it.value)
        after_set(p.id, entry.id, M.set_config(p.id, entry.id, json))
      end
    end)
    return
  end
  local default = cur
  if default == nil then
    default = entry.defaultValue
  end
  vim.ui.input({
    prompt = string.format('%s (%s%s): ', entry.label or entry.id, entry.type, entry.type ~= 'string' and ', empty = default' or ''),
    default = default ~= nil and (type(default) == 'string' and default or vim.json.encode(default)) or '',
  }, function(text)
    if text == nil then
      return
    end
    local json, perr = model.parse_config_input(entry.type, text)
    if not json then
      return notify(string.format('%s: %s not changed: %s', p.id, entry.id, perr), vim.log.levels.ERROR)
    end
    after_set(p.id, entry.id, M.set_config(p.id, entry.id, json))
  end)
end

function M.config_command(id, key)
  local function with_plugin(p)
    local items = model.config_items(p.manifest, p.values)
    if #items == 0 then
      return notify(p.id .. ' has no configuration', vim.log.levels.WARN)
    end
    if key then
      for _, it in ipairs(items) do
        if it.entry.id == key then
          return M.edit_config(p, it.entry)
        end
      end
      return notify(string.format('%s has no configuration %s', p.id, key), vim.log.levels.ERROR)
    end
    vim.ui.select(items, {
      prompt = (p.name or p.id) .. ' settings',
      format_item = function(it)
        return it.label
      end,
    }, function(it)
      if it then
        M.edit_config(p, it.entry)
      end
    end)
  end
  if id then
    local p, err = M.plugin(id)
    if not p then
      return notify(err, vim.log.levels.ERROR)
    end
    return with_plugin(p)
  end
  local list, err = M.list()
  if not list then
    return notify(err, vim.log.levels.ERROR)
  end
  local configurable = vim.tbl_filter(function(p)
    return #(p.manifest.configuration or {}) > 0
  end, list)
  if #configurable == 0 then
    return notify('no installed plugin has settings', vim.log.levels.WARN)
  end
  vim.ui.select(configurable, {
    prompt = 'Plugin settings',
    format_item = function(p)
      return p.name or p.id
    end,
  }, function(p)
    if p then
      with_plugin(p)
    end
  end)
end

---------------------------------------------------------------------------
-- Views, panels, the browser
---------------------------------------------------------------------------

--- Opens `url` in the browser: `browser` when set, else vim.ui.open, else
--- xdg-open / open. Returns true, or nil and a message.
function M.open_url(url)
  local browser = M.config.browser or vim.g.qwen_companion_browser
  if not browser and vim.ui.open then
    local cmd, err = vim.ui.open(url)
    if not cmd then
      return nil, tostring(err)
    end
    return true
  end
  local argv = model.browser_command(url, browser, jit.os)
  local ok, job = pcall(vim.fn.jobstart, argv, { detach = true })
  if not ok or job <= 0 then
    return nil, 'cannot run ' .. argv[1] .. ': ' .. tostring(job)
  end
  return true
end

--- The colour scheme pages get: Neovim's 'background' (light or dark).
local function scheme()
  return vim.o.background == 'dark' and 'dark' or 'light'
end

--- Starts the view server of the core's host once (it runs until the host
--- is freed). Returns the host, or nil and a message.
function M.ensure_views()
  local H, err = M.host()
  if not H then
    return nil, err
  end
  if state.views_for ~= H.h then
    local ok, verr, st = capi.call(H.lib, 'qc_plugin_host_views_start', H.h, vim.json.encode({ colorScheme = scheme() }), nil)
    if not ok and st ~= capi.status.QC_ALREADY_RUNNING then
      return nil, verr
    end
    state.views_for = H.h
    capi.call(H.lib, 'qc_plugin_host_set_color_scheme', H.h, scheme())
  end
  return H
end

--- The pages the view server serves now (`{url, views, panels, colorScheme}`).
function M.views()
  local H, err = M.ensure_views()
  if not H then
    return nil, err
  end
  return ext.out_json(H.lib, 'qc_plugin_host_views_json', H.h)
end

--- The URL of view `view_id` of plugin `id` (nil `view_id`: its panel),
--- from the host's view server (started on first use). Each URL carries
--- its own capability and works in any browser.
function M.view_url(id, view_id)
  local H, err = M.ensure_views()
  if not H then
    return nil, err
  end
  return ext.out_string(H.lib, 'qc_plugin_host_view_url', H.h, id, view_id)
end

--- Follows Neovim's 'background' (pages get onColorSchemeChange).
function M.sync_color_scheme()
  local H = M.host()
  if H and state.views_for == H.h then
    return capi.call(H.lib, 'qc_plugin_host_set_color_scheme', H.h, scheme())
  end
  return true
end

function M.view_command(id, view_id, panel)
  if not id and not panel and state.last_view then
    local ok, err = M.open_url(state.last_view.url)
    if not ok then
      notify(err, vim.log.levels.ERROR)
    end
    return ok
  end
  local function open(pid, vid)
    M.sync_color_scheme() -- 'background' may have changed before VimEnter (no OptionSet then)
    local url, err = M.view_url(pid, vid)
    if not url then
      return notify(err, vim.log.levels.ERROR)
    end
    local ok, oerr = M.open_url(url)
    if not ok then
      notify(oerr, vim.log.levels.ERROR)
    end
  end
  local list, err = M.list()
  if not list then
    return notify(err, vim.log.levels.ERROR)
  end
  local items = {}
  for _, p in ipairs(list) do
    if p.enabled ~= false and (id == nil or p.id == id) then
      local views, has_panel = model.views(p.manifest)
      if panel then
        if has_panel then
          items[#items + 1] = { plugin = p.id, label = (p.name or p.id) .. ': ' .. (p.manifest.ui.title or 'panel') }
        end
      else
        for _, v in ipairs(views) do
          if view_id == nil or v.id == view_id then
            items[#items + 1] = { plugin = p.id, view = v.id, label = (p.name or p.id) .. ': ' .. v.title }
          end
        end
      end
    end
  end
  if #items == 0 then
    return notify(string.format('no %s%s', panel and 'panel' or 'view', id and (' of ' .. id) or ''), vim.log.levels.WARN)
  elseif #items == 1 then
    return open(items[1].plugin, items[1].view)
  end
  vim.ui.select(items, {
    prompt = panel and 'Open plugin panel' or 'Open plugin view',
    format_item = function(it)
      return it.label
    end,
  }, function(it)
    if it then
      open(it.plugin, it.view)
    end
  end)
end

---------------------------------------------------------------------------
-- Document parsers
---------------------------------------------------------------------------

--- Parses file `path` with the parser for `mime` (default: by extension).
--- Returns `{success, text|reason}`, or nil and a message.
function M.parse(path, mime)
  local H, err = M.host()
  if not H then
    return nil, err
  end
  mime = mime or model.mime_of(path)
  if not mime then
    return nil, 'unknown file type of ' .. path .. ' (:QwenPlugin parse MIME)'
  end
  local f, ferr = io.open(path, 'rb')
  if not f then
    return nil, ferr
  end
  local data = f:read('*a')
  f:close()
  local bytes = ffi.new('uint8_t[?]', math.max(#data, 1))
  ffi.copy(bytes, data, #data)
  return ext.plugin_call(H.lib, 'qc_plugin_host_parse_document', true, H.h, mime, bytes, #data)
end

function M.parse_command(mime)
  local path = api.nvim_buf_get_name(0)
  if path == '' or vim.fn.filereadable(path) ~= 1 then
    return notify('the current buffer is not a file on disk', vim.log.levels.ERROR)
  end
  local res, err = M.parse(path, mime)
  if not res then
    return notify('cannot parse ' .. vim.fn.fnamemodify(path, ':t') .. ': ' .. tostring(err), vim.log.levels.ERROR)
  end
  if not res.success then
    return notify('the parser refused ' .. vim.fn.fnamemodify(path, ':t') .. ': ' .. tostring(res.reason), vim.log.levels.WARN)
  end
  return M.scratch('Qwen parsed: ' .. vim.fn.fnamemodify(path, ':t'), vim.split(res.text or '', '\n', { plain = true }))
end

---------------------------------------------------------------------------
-- The plugin manager
---------------------------------------------------------------------------

local function reload_keymaps()
  if M.config.keymaps then
    M.apply_keybindings()
  end
end

function M.install(path)
  local H, err = M.host()
  if not H then
    return nil, err
  end
  local res, ierr, _, detail = ext.plugin_call(H.lib, 'qc_plugin_host_install', true, H.h, vim.fn.fnamemodify(vim.fn.expand(path), ':p'))
  if not res then
    local lines = { tostring(ierr) }
    for _, pr in ipairs(detail and detail.problems or {}) do
      lines[#lines + 1] = '  ' .. tostring(pr.path or '') .. ': ' .. tostring(pr.message or '')
    end
    return nil, table.concat(lines, '\n')
  end
  reload_keymaps()
  return res
end

function M.uninstall(id, remove_data)
  local H, err = M.host()
  if not H then
    return nil, err
  end
  local res, uerr = ext.plugin_call(H.lib, 'qc_plugin_host_uninstall', true, H.h, id, remove_data and 1 or 0)
  reload_keymaps()
  return res, uerr
end

function M.set_enabled(id, enabled)
  local H, err = M.host()
  if not H then
    return nil, err
  end
  local ok, serr = capi.call(H.lib, enabled and 'qc_plugin_host_enable' or 'qc_plugin_host_disable', H.h, id)
  reload_keymaps()
  return ok, serr
end

--- The manager buffer's lines, one per plugin after a header.
function M.manager_lines(list)
  local lines = { 'Qwen plugins — e enable, d disable, u uninstall, i install, r run, c settings, v view, R refresh' }
  for _, p in ipairs(list) do
    lines[#lines + 1] = model.plugin_line(p)
  end
  if #list == 0 then
    lines[#lines + 1] = '(no plugin installed: i or :QwenPlugin install PATH)'
  end
  return lines
end

function M.list_command()
  local list, err = M.list()
  if not list then
    return notify(err, vim.log.levels.ERROR)
  end
  local b = M.scratch('Qwen plugins', M.manager_lines(list), { filetype = 'qwenplugins' })
  vim.b[b].qwen_plugin_ids = vim.tbl_map(function(p)
    return p.id
  end, list)
  local function id_here()
    local row = api.nvim_win_get_cursor(0)[1]
    return (vim.b[b].qwen_plugin_ids or {})[row - 1]
  end
  local function with_id(fn)
    return function()
      local id = id_here()
      if id then
        fn(id)
      end
    end
  end
  local function report(ok, e)
    if not ok then
      notify(tostring(e), vim.log.levels.ERROR)
    end
    M.list_command()
  end
  local maps = {
    e = with_id(function(id)
      report(M.set_enabled(id, true))
    end),
    d = with_id(function(id)
      report(M.set_enabled(id, false))
    end),
    u = with_id(function(id)
      vim.ui.select({ 'uninstall, keep its data', 'uninstall and remove its data' }, { prompt = 'Uninstall ' .. id }, function(c, i)
        if c then
          report(M.uninstall(id, i == 2))
        end
      end)
    end),
    i = function()
      vim.ui.input({ prompt = 'Install plugin (folder or .zip): ', completion = 'file' }, function(path)
        if path and path ~= '' then
          report(M.install(path))
        end
      end)
    end,
    r = with_id(function(id)
      M.run_command(id)
    end),
    c = with_id(function(id)
      M.config_command(id)
    end),
    v = with_id(function(id)
      M.view_command(id)
    end),
    R = M.list_command,
  }
  for lhs, fn in pairs(maps) do
    vim.keymap.set('n', lhs, fn, { buffer = b, nowait = true })
  end
  return b
end

---------------------------------------------------------------------------
-- Keybindings of the manifests
---------------------------------------------------------------------------

--- Maps every enabled plugin's keybinding (normal mode) where the key is
--- free; removes the ones of plugins gone or disabled. Returns the mapped
--- `{lhs = {plugin, tool}}`.
function M.apply_keybindings()
  for lhs in pairs(state.mapped) do
    pcall(vim.keymap.del, 'n', lhs)
    state.mapped[lhs] = nil
  end
  local list = M.list()
  for _, p in ipairs(list or {}) do
    if p.enabled ~= false then
      for _, kb in ipairs(model.keybindings(p, jit.os)) do
        if vim.fn.maparg(kb.lhs, 'n') == '' and not state.mapped[kb.lhs] then
          local id, tool = p.id, kb.tool
          vim.keymap.set('n', kb.lhs, function()
            M.run_command(id, tool)
          end, { desc = string.format('Qwen plugin %s: %s', id, tool) })
          state.mapped[kb.lhs] = { plugin = id, tool = tool }
        end
      end
    end
  end
  return state.mapped
end

---------------------------------------------------------------------------
-- Host events (notifications)
---------------------------------------------------------------------------

--- show_notification as the plugin UI shows it: vim.notify with the
--- plugin's title and body; when the request carries a view of the view
--- server (`params.view = {id, title, url}`), `:QwenPlugin view` opens it.
--- Returns the answer (`{shown = true}`), or nil and a message.
function M.notification(req)
  local p = type(req.params) == 'table' and req.params or {}
  local view = type(p.view) == 'table' and type(p.view.url) == 'string' and p.view or nil
  local title = type(p.title) == 'string' and p.title or ''
  local body = type(p.body) == 'string' and p.body or ''
  if title == '' and body == '' then
    return nil, 'show_notification needs a title or a body'
  end
  if view then
    state.last_view = { plugin = req.plugin, id = view.id, title = view.title, url = view.url }
  end
  local text = string.format('[%s] %s', tostring(req.plugin), title)
  if body ~= '' then
    text = text .. (title ~= '' and ': ' or '') .. body
  end
  if view then
    text = text .. '  (:QwenPlugin view opens ' .. tostring(view.title or view.id) .. ')'
  end
  notify(text)
  return { shown = true }
end

--- Handles one event the core pulled from the plugin host
--- (`qc_plugin_host_next_event`): `call_done` (queued calls), crash-loop
--- disables, `views_changed`. Returns true when handled.
function M.handle_event(ev)
  if type(ev) ~= 'table' then
    return false
  end
  if ev.type == 'call_done' then
    local key = tostring(ev.callId)
    local done = state.calls[key]
    state.calls[key] = nil
    if done then
      if ev.ok then
        done(ev.result)
      else
        local e = ev.error or {}
        done(nil, e.pluginMessage or e.message or e.kind, e)
      end
    end
    return true
  elseif ev.type == 'plugin_disabled' then
    notify(string.format('plugin %s was disabled: %s (:QwenPlugin enable %s)', tostring(ev.plugin), tostring(ev.reason), tostring(ev.plugin)), vim.log.levels.WARN)
    return true
  elseif ev.type == 'views_changed' then
    reload_keymaps()
    return true
  end
  return false
end

--- Joins the core's host object (qwen_companion.plugins: `on_event`,
--- `handle`), which pulls the events: every event but requests comes to
--- handle_event, show_notification requests to M.notification.
function M.attach(host)
  if type(host) ~= 'table' or type(host.on_event) ~= 'function' or state.attached == host then
    return false
  end
  state.attached = host
  host:on_event(function(ev)
    if ev.type ~= 'host_request' then
      M.handle_event(ev)
    end
  end)
  if type(host.handle) == 'function' then
    host:handle('show_notification', M.notification)
  end
  -- The view server runs from the start, so notifications carry their view.
  local ok, err = M.ensure_views()
  if not ok then
    notify('the view server did not start: ' .. tostring(err), vim.log.levels.WARN)
  end
  api.nvim_create_autocmd({ 'ColorScheme', 'OptionSet' }, {
    group = api.nvim_create_augroup('QwenPluginViews', { clear = true }),
    pattern = '*',
    callback = function(a)
      if a.event == 'ColorScheme' or a.match == 'background' then
        M.sync_color_scheme()
      end
    end,
  })
  return true
end

---------------------------------------------------------------------------
-- :QwenPlugin
---------------------------------------------------------------------------

local function ids()
  local list = M.list()
  return vim.tbl_map(function(p)
    return p.id
  end, list or {})
end

local function starting(list, lead)
  return vim.tbl_filter(function(s)
    return vim.startswith(s, lead)
  end, list)
end

--- Completion of :QwenPlugin: subcommands, then plugin ids (files for
--- install), then the plugin's tools / configuration keys / views.
function M.complete(lead, line)
  local words = vim.split(line:gsub('^%s*%S+%s*', ''), '%s+', { trimempty = false })
  local n = #words -- the word being completed is the last one
  if n <= 1 then
    return starting(model.SUBCOMMANDS, lead)
  end
  local sub = words[1]:gsub('!$', '')
  if n == 2 then
    if sub == 'install' then
      return vim.fn.getcompletion(lead, 'file')
    elseif sub == 'parse' then
      local mimes = {}
      for _, d in ipairs(model.parsers(M.list() or {})) do
        mimes[#mimes + 1] = d.mime
      end
      return starting(mimes, lead)
    elseif sub == 'list' then
      return {}
    end
    return starting(ids(), lead)
  end
  if n == 3 then
    local p = M.plugin(words[2])
    if not p then
      return {}
    end
    local out = {}
    if sub == 'run' then
      for _, a in ipairs(model.actions(p, jit.os, true)) do
        out[#out + 1] = a.tool
      end
    elseif sub == 'config' then
      for _, it in ipairs(model.config_items(p.manifest, p.values)) do
        out[#out + 1] = it.entry.id
      end
    elseif sub == 'view' then
      for _, v in ipairs(model.views(p.manifest)) do
        out[#out + 1] = v.id
      end
    end
    return starting(vim.fn.uniq(vim.fn.sort(out)), lead)
  end
  return {}
end

--- :QwenPlugin {sub} [args].
function M.command(a)
  local args = vim.split(vim.trim(a.args or ''), '%s+', { trimempty = true })
  local sub, x, y = args[1], args[2], args[3]
  local function report(ok, err, what)
    if ok then
      notify(what)
    else
      notify(tostring(err), vim.log.levels.ERROR)
    end
  end
  if sub == nil or sub == 'list' then
    return M.list_command()
  elseif sub == 'install' then
    if not x then
      return notify('usage: :QwenPlugin install PATH (a folder or .zip)', vim.log.levels.ERROR)
    end
    local res, err = M.install(table.concat(args, ' ', 2))
    return report(res, err, res and string.format('installed %s %s%s', res.id, res.version or '', res.replaced and (' (replaced ' .. tostring(res.previousVersion) .. ')') or ''))
  elseif sub == 'uninstall' then
    if not x then
      return notify('usage: :QwenPlugin uninstall ID (:QwenPlugin! uninstall ID also removes its data)', vim.log.levels.ERROR)
    end
    local res, err = M.uninstall(x, a.bang)
    return report(res, err, 'uninstalled ' .. x .. (a.bang and ' (data removed)' or ''))
  elseif sub == 'enable' or sub == 'disable' then
    if not x then
      return notify('usage: :QwenPlugin ' .. sub .. ' ID', vim.log.levels.ERROR)
    end
    local ok, err = M.set_enabled(x, sub == 'enable')
    return report(ok, err, sub .. 'd ' .. x)
  elseif sub == 'run' then
    return M.run_command(x, y)
  elseif sub == 'config' then
    return M.config_command(x, y)
  elseif sub == 'view' then
    return M.view_command(x, y, false)
  elseif sub == 'panel' then
    return M.view_command(x, nil, true)
  elseif sub == 'parse' then
    return M.parse_command(x)
  end
  notify('unknown :QwenPlugin subcommand ' .. sub .. ' (' .. table.concat(model.SUBCOMMANDS, ', ') .. ')', vim.log.levels.ERROR)
end

function M.setup(opts)
  M.config = vim.tbl_extend('force', M.config, opts or {})
end

return M
