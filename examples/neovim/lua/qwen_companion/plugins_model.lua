-- qwen_companion.plugins_model: the pure logic of the plugin UI
-- (:QwenPlugin): what a plugin's manifest contributes (commands, menus,
-- session action, keybindings, configuration, document parsers, views),
-- how results are shown (checklists, file cards), and how the user's typed
-- configuration values are checked. No vim API call except vim.json /
-- vim.split / vim.fn.fnamemodify, so the headless tests run it directly.

local M = {}

--- Subcommands of :QwenPlugin, in the order completion offers them.
M.SUBCOMMANDS = { 'list', 'install', 'uninstall', 'enable', 'disable', 'run', 'config', 'view', 'panel', 'parse' }

---------------------------------------------------------------------------
-- Keybindings: the manifest's `mod+shift+d`
---------------------------------------------------------------------------

local KEY_NAMES = {
  enter = 'CR', ['return'] = 'CR', escape = 'Esc', esc = 'Esc', tab = 'Tab', space = 'Space',
  backspace = 'BS', delete = 'Del', up = 'Up', down = 'Down', left = 'Left', right = 'Right',
  home = 'Home', ['end'] = 'End', pageup = 'PageUp', pagedown = 'PageDown',
}

--- Parses a manifest key (`mod+shift+d`, `ctrl+alt+f5`): `{ mods = {ctrl=,
--- shift=, alt=, cmd=}, key = 'd' | 'F5' | 'CR' … }`, or nil and a message.
--- `mod` is Cmd on macOS and Ctrl elsewhere (`os` is jit.os).
function M.parse_key(text, os)
  if type(text) ~= 'string' or text == '' then
    return nil, 'empty key'
  end
  local mods, key = {}, nil
  local parts = vim.split(text:lower(), '+', { plain = true })
  for i, p in ipairs(parts) do
    if i < #parts then
      if p == 'mod' then
        mods[os == 'OSX' and 'cmd' or 'ctrl'] = true
      elseif p == 'ctrl' or p == 'control' then
        mods.ctrl = true
      elseif p == 'shift' then
        mods.shift = true
      elseif p == 'alt' or p == 'option' or p == 'meta' then
        mods.alt = true
      elseif p == 'cmd' or p == 'command' or p == 'super' then
        mods.cmd = true
      else
        return nil, string.format('unknown modifier %q in %q', p, text)
      end
    else
      if p:match('^%w$') then
        key = p
      elseif p:match('^f%d%d?$') and tonumber(p:sub(2)) <= 12 then
        key = p:upper()
      elseif KEY_NAMES[p] then
        key = KEY_NAMES[p]
      else
        return nil, string.format('unknown key %q in %q', p, text)
      end
    end
  end
  if not key then
    return nil, 'no key in ' .. text
  end
  return { mods = mods, key = key }
end

--- The Neovim left-hand side of a manifest key: `mod+shift+d` → `<C-S-d>`
--- (`<D-S-d>` on macOS, where `mod` is Cmd).
function M.keybinding_lhs(text, os)
  local k, err = M.parse_key(text, os)
  if not k then
    return nil, err
  end
  local pre = (k.mods.ctrl and 'C-' or '') .. (k.mods.alt and 'M-' or '') .. (k.mods.cmd and 'D-' or '') .. (k.mods.shift and 'S-' or '')
  if pre == '' and #k.key == 1 then
    return k.key
  end
  return '<' .. pre .. k.key .. '>'
end

--- The key as a user reads it: `mod+shift+d` → `Ctrl+Shift+D` (`Cmd+Shift+D` on macOS).
function M.keybinding_label(text, os)
  local k, err = M.parse_key(text, os)
  if not k then
    return nil, err
  end
  local out = {}
  for _, m in ipairs({ { 'ctrl', 'Ctrl' }, { 'alt', 'Alt' }, { 'cmd', 'Cmd' }, { 'shift', 'Shift' } }) do
    if k.mods[m[1]] then
      out[#out + 1] = m[2]
    end
  end
  out[#out + 1] = #k.key == 1 and k.key:upper() or k.key
  return table.concat(out, '+')
end

---------------------------------------------------------------------------
-- Contributions of a manifest
---------------------------------------------------------------------------

local function tool_summary(manifest, name)
  for _, t in ipairs(manifest.tools or {}) do
    if t.name == name then
      return t.summary or t.description
    end
  end
end

--- What a plugin offers to run, for vim.ui.select: its `commands` (with the
--- keybinding label when one is bound), its `menus` entries, and its
--- `sessionAction` when `visible` is not false. Each item: `{ tool, title,
--- source = 'command'|'menu'|'session', key?, label }`.
function M.actions(plugin, os, visible)
  local m = plugin.manifest or {}
  local keys = {}
  for _, kb in ipairs(m.keybindings or {}) do
    if kb.command then
      keys[kb.command] = kb.key
    end
  end
  local items = {}
  local function add(tool, title, source)
    local key = source == 'command' and keys[tool] or nil
    local label = string.format('%s: %s', plugin.name or plugin.id, title or tool_summary(m, tool) or tool)
    if key then
      label = label .. '  (' .. (M.keybinding_label(key, os) or key) .. ')'
    end
    if source ~= 'command' then
      label = label .. '  [' .. source .. ']'
    end
    items[#items + 1] = { plugin = plugin.id, tool = tool, title = title, source = source, key = key, label = label }
  end
  for _, c in ipairs(m.commands or {}) do
    add(c.tool, c.title, 'command')
  end
  local places = {}
  for place in pairs(m.menus or {}) do
    places[#places + 1] = place
  end
  table.sort(places)
  for _, place in ipairs(places) do
    for _, e in ipairs(m.menus[place]) do
      add(e.tool, e.title, 'menu')
    end
  end
  if m.sessionAction and m.sessionAction.tool and visible ~= false then
    add(m.sessionAction.tool, m.sessionAction.tooltip, 'session')
  end
  return items
end

--- Every keybinding of a plugin: `{ plugin, tool, key, lhs, label }`.
function M.keybindings(plugin, os)
  local out = {}
  for _, kb in ipairs((plugin.manifest or {}).keybindings or {}) do
    local lhs = M.keybinding_lhs(kb.key, os)
    if lhs and kb.command then
      out[#out + 1] = { plugin = plugin.id, tool = kb.command, key = kb.key, lhs = lhs, label = M.keybinding_label(kb.key, os) }
    end
  end
  return out
end

--- The tool `name` of a manifest (nil when it has none).
function M.tool(manifest, name)
  for _, t in ipairs((manifest or {}).tools or {}) do
    if t.name == name then
      return t
    end
  end
end

---------------------------------------------------------------------------
-- Configuration
---------------------------------------------------------------------------

--- How a configuration value is shown.
function M.show_value(v)
  if v == nil or v == vim.NIL then
    return '(default)'
  end
  if type(v) == 'string' then
    return v == '' and '""' or v
  end
  return vim.json.encode(v)
end

--- The configuration entries of a plugin for vim.ui.select: `{ entry,
--- value, label }` with the user's value (`values[id]`) or the default.
function M.config_items(manifest, values)
  local items = {}
  for _, e in ipairs((manifest or {}).configuration or {}) do
    local v = values and values[e.id]
    local set = v ~= nil and v ~= vim.NIL
    if not set then
      v = e.defaultValue
    end
    items[#items + 1] = {
      entry = e,
      value = v,
      label = string.format('%s (%s): %s%s', e.label or e.id, e.type, M.show_value(v), set and '' or '  [default]'),
    }
  end
  return items
end

--- The select options as vim.ui.select items: the library's list ("Auto"
--- first, with the entry's default as value) with the current value marked.
--- `current` nil means Auto is in effect.
function M.option_items(options, current)
  local items = {}
  for i, o in ipairs(options or {}) do
    local is_auto = i == 1 and o.label == 'Auto'
    local mark = ''
    if (current == nil and is_auto) or (current ~= nil and not is_auto and o.value == current) then
      mark = '  (current)'
    end
    items[#items + 1] = {
      value = o.value,
      auto = is_auto,
      label = (o.label or M.show_value(o.value)) .. mark,
    }
  end
  return items
end

--- Parses what the user typed for a boolean, string or number entry into
--- the JSON text the library stores (`''` for a number or boolean resets it:
--- `null`). Returns the JSON text, or nil and a message.
function M.parse_config_input(kind, text)
  text = text or ''
  if kind == 'string' then
    return vim.json.encode(text)
  end
  local t = vim.trim(text)
  if t == '' then
    return 'null'
  end
  if kind == 'number' then
    local n = tonumber(t)
    if not n or n ~= n or n == math.huge or n == -math.huge then
      return nil, string.format('%q is not a number', text)
    end
    return vim.json.encode(n)
  elseif kind == 'boolean' then
    local l = t:lower()
    if l == 'true' or l == 'yes' or l == 'on' or l == '1' then
      return 'true'
    elseif l == 'false' or l == 'no' or l == 'off' or l == '0' then
      return 'false'
    end
    return nil, string.format('%q is not true or false', text)
  end
  return nil, 'unknown configuration type ' .. tostring(kind)
end

---------------------------------------------------------------------------
-- Results
---------------------------------------------------------------------------

M.STATUS_MARKS = { completed = '[x]', in_progress = '[~]', pending = '[ ]', cancelled = '[-]', failed = '[!]' }

--- The lines of a checklist result (`details.todos` = `[{id, content,
--- status}]`): a title, then one line per step with its status mark, then a
--- count. Without todos: the text blocks.
function M.checklist_lines(title, result)
  local todos = type(result) == 'table' and type(result.details) == 'table' and result.details.todos
  local lines = { title }
  if type(todos) ~= 'table' or #todos == 0 then
    vim.list_extend(lines, M.text_lines(result))
    return lines
  end
  local done = 0
  for _, t in ipairs(todos) do
    local st = t.status or 'pending'
    if st == 'completed' then
      done = done + 1
    end
    lines[#lines + 1] = string.format('%s %s', M.STATUS_MARKS[st] or ('[' .. tostring(st) .. ']'), tostring(t.content or t.title or t.id or ''))
  end
  lines[#lines + 1] = string.format('%d of %d done', done, #todos)
  return lines
end

--- The text of a result's `content` blocks (non-text blocks by type).
function M.text_lines(result)
  local lines = {}
  for _, b in ipairs(type(result) == 'table' and result.content or {}) do
    if b.type == 'text' then
      vim.list_extend(lines, vim.split(b.text or '', '\n', { plain = true }))
    else
      lines[#lines + 1] = '[' .. tostring(b.type) .. ']'
    end
  end
  return lines
end

--- The file card of a result (`details.filePath`, absolute), or nil.
function M.file_card(result)
  local d = type(result) == 'table' and result.details
  if type(d) == 'table' and type(d.filePath) == 'string' and require('qwen_companion.platform').is_absolute(d.filePath) then
    return { path = d.filePath, name = d.fileName or vim.fn.fnamemodify(d.filePath, ':t') }
  end
end

--- How a result is shown: `checklist` (renderAs, or todos in details),
--- `file` (a file card), else `text`.
function M.result_kind(tool, result)
  if (tool and tool.renderAs == 'checklist') then
    return 'checklist'
  end
  if M.file_card(result) then
    return 'file'
  end
  return 'text'
end

--- One line per plugin for the plugin manager.
function M.plugin_line(p)
  local tools = {}
  for _, t in ipairs(p.tools or {}) do
    if t.modelVisible ~= false then
      tools[#tools + 1] = t.name
    end
  end
  local line = string.format('%s %s %s', p.enabled == false and '[off]' or '[on] ', p.id, p.version or '?')
  if p.name and p.name ~= p.id then
    line = line .. '  ' .. p.name
  end
  if #tools > 0 then
    line = line .. '  tools: ' .. table.concat(tools, ', ')
  end
  if p.error then
    line = line .. '  BROKEN: ' .. tostring(p.error.message or p.error.code)
  end
  local le = p.lastError
  if type(le) == 'table' and le.message then
    line = line .. '  last error: ' .. tostring(le.message)
  end
  return line
end

---------------------------------------------------------------------------
-- Document parsers
---------------------------------------------------------------------------

--- MIME types by file extension (the ones document parsers usually declare).
M.MIME = {
  md = 'text/markdown', markdown = 'text/markdown', txt = 'text/plain', text = 'text/plain',
  html = 'text/html', htm = 'text/html', csv = 'text/csv', json = 'application/json',
  xml = 'application/xml', pdf = 'application/pdf', yaml = 'application/yaml', yml = 'application/yaml',
  docx = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  pptx = 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  png = 'image/png', jpg = 'image/jpeg', jpeg = 'image/jpeg', gif = 'image/gif', svg = 'image/svg+xml',
}

function M.mime_of(path)
  local ext = (path or ''):match('%.([%w]+)$')
  return ext and M.MIME[ext:lower()] or nil
end

--- Every (plugin, mime) document parser of enabled plugins.
function M.parsers(plugins)
  local out = {}
  for _, p in ipairs(plugins or {}) do
    if p.enabled ~= false then
      for _, d in ipairs((p.manifest or {}).documentParsers or {}) do
        out[#out + 1] = { plugin = p.id, mime = d.mimeType, tool = d.toolName }
      end
    end
  end
  return out
end

---------------------------------------------------------------------------
-- Views
---------------------------------------------------------------------------

--- The views of a plugin's manifest (`{id, title}`), and whether it has a panel.
function M.views(manifest)
  local out = {}
  for _, v in ipairs((manifest or {}).views or {}) do
    out[#out + 1] = { id = v.id, title = v.title or v.id }
  end
  return out, (manifest or {}).ui ~= nil
end

--- The command that opens `url` in the browser when vim.ui.open is missing
--- (or `browser` names a program): a list for vim.fn.jobstart.
function M.browser_command(url, browser, os)
  if type(browser) == 'string' and browser ~= '' then
    return { browser, url }
  elseif type(browser) == 'table' and #browser > 0 then
    local cmd = vim.deepcopy(browser)
    cmd[#cmd + 1] = url
    return cmd
  end
  return { os == 'OSX' and 'open' or 'xdg-open', url }
end

return M
