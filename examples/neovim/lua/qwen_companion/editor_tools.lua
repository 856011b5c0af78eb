-- qwen_companion.editor_tools: what Neovim knows, as tools Qwen Code can
-- call (mcp__qwen-companion-plugins__editor-diagnostics, -open-file,
-- -open-editors, -selection). The plugin host offers four capabilities; the
-- library turns them into tools of the plugin MCP server and hands each call
-- to Neovim as a pulled `host_request`, answered on the main loop by the
-- handlers below (qwen_companion.plugins). Plugins whose manifest declares
-- the `editor` permission may call them too.
--
-- Lines and columns are 1-based; columns count characters (Unicode code
-- points), where Neovim counts bytes from 0 (vim.diagnostic, marks).

local api = vim.api
local bit = require('bit')

local M = {}

--- The capability names, in the order they are offered.
M.CAPABILITIES = { 'editor_diagnostics', 'editor_open_file', 'editor_open_editors', 'editor_selection' }

--- vim.diagnostic.severity (1 ERROR … 4 HINT) as the tools name them.
M.SEVERITY = { 'error', 'warning', 'information', 'hint' }
local RANK = { error = 1, warning = 2, information = 3, hint = 4 }

--- The 1-based character column of the 0-based byte offset `byte` of
--- `line` (a byte inside a character counts as that character; past the
--- end, each missing byte counts one).
function M.char_col(line, byte)
  line = line or ''
  if byte <= 0 then
    return 1
  end
  local n = 0
  for i = 1, math.min(byte, #line) do
    local b = line:byte(i)
    if b < 0x80 or b >= 0xC0 then
      n = n + 1
    end
  end
  if byte > #line then
    n = n + (byte - #line)
  elseif byte < #line and bit.band(line:byte(byte + 1), 0xC0) == 0x80 then
    n = n - 1 -- `byte` points into a character: that character
  end
  return n + 1
end

--- The 0-based byte offset of the 1-based character column `col` of `line`
--- (past the end: the end of the line).
function M.byte_col(line, col)
  line = line or ''
  local n = 0
  for i = 1, #line do
    local b = line:byte(i)
    if b < 0x80 or b >= 0xC0 then
      n = n + 1
      if n == col then
        return i - 1
      end
    end
  end
  return #line
end

--- The absolute path of a buffer that has a name and is a normal buffer
--- (not a terminal, help, scratch or `scheme://` buffer), else nil.
function M.path_of(buf)
  if not api.nvim_buf_is_valid(buf) or vim.bo[buf].buftype ~= '' then
    return nil
  end
  local name = api.nvim_buf_get_name(buf)
  if name == '' or name:find('^%a[%w+.-]*://') then
    return nil
  end
  return vim.fn.fnamemodify(name, ':p')
end

local function buffer_of(path)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if M.path_of(buf) == path then
      return buf
    end
  end
  return nil
end

local function line_of(buf, lnum, cache)
  cache[lnum] = cache[lnum] or (api.nvim_buf_is_loaded(buf) and api.nvim_buf_get_lines(buf, lnum, lnum + 1, false)[1]) or ''
  return cache[lnum]
end

--- One vim.diagnostic item as the tool gives it (path of its buffer).
function M.convert(d, path, lines)
  lines = lines or {}
  local out = {
    path = path,
    line = d.lnum + 1,
    column = M.char_col(line_of(d.bufnr, d.lnum, lines), d.col or 0),
    severity = M.SEVERITY[d.severity] or 'error',
    message = tostring(d.message or ''),
  }
  if d.end_lnum then
    out.endLine = d.end_lnum + 1
    out.endColumn = M.char_col(line_of(d.bufnr, d.end_lnum, lines), d.end_col or 0)
  end
  if type(d.source) == 'string' and d.source ~= '' then
    out.source = d.source
  end
  if d.code ~= nil and d.code ~= vim.NIL then
    out.code = tostring(d.code)
  end
  return out
end

--- editor_diagnostics: `{path?, severity?}` → `{diagnostics = [...]}`,
--- those of `path` (none when Neovim has no buffer for it) or of every file
--- buffer, at least as severe as `severity`.
function M.diagnostics(params)
  params = type(params) == 'table' and params or {}
  local worst = 4
  if params.severity ~= nil then
    worst = RANK[params.severity]
    if not worst then
      return nil, 'unknown severity ' .. tostring(params.severity) .. ' (error, warning, information or hint)'
    end
  end
  local items
  if type(params.path) == 'string' then
    local buf = buffer_of(vim.fn.fnamemodify(params.path, ':p'))
    items = buf and vim.diagnostic.get(buf) or {}
  else
    items = vim.diagnostic.get(nil)
  end
  local out, lines = {}, {}
  for _, d in ipairs(items) do
    local path = M.path_of(d.bufnr)
    if path and (d.severity or 1) <= worst then
      lines[d.bufnr] = lines[d.bufnr] or {}
      out[#out + 1] = M.convert(d, path, lines[d.bufnr])
    end
  end
  table.sort(out, function(a, b)
    if a.path ~= b.path then
      return a.path < b.path
    end
    if a.line ~= b.line then
      return a.line < b.line
    end
    return a.column < b.column
  end)
  return { diagnostics = out }
end

-- A window of the current tab for opening a file: one showing `buf`, else
-- the previous window when it is a normal one, else any normal window,
-- else a new split (the current window may be the Qwen Code terminal).
local function target_window(buf)
  local wins = api.nvim_tabpage_list_wins(0)
  if buf then
    for _, w in ipairs(wins) do
      if api.nvim_win_get_buf(w) == buf then
        return w
      end
    end
  end
  local function normal(w)
    return api.nvim_win_is_valid(w) and api.nvim_win_get_config(w).relative == ''
      and vim.bo[api.nvim_win_get_buf(w)].buftype == ''
  end
  local cur = api.nvim_get_current_win()
  if normal(cur) then
    return cur
  end
  local prev = vim.fn.win_getid(vim.fn.winnr('#'))
  if prev ~= 0 and normal(prev) then
    return prev
  end
  for _, w in ipairs(wins) do
    if normal(w) then
      return w
    end
  end
  if api.nvim_win_get_config(cur).relative ~= '' then
    api.nvim_win_close(cur, false) -- a floating terminal: hide it
    return api.nvim_get_current_win()
  end
  vim.cmd('aboveleft vsplit')
  return api.nvim_get_current_win()
end

--- editor_open_file: `{path, line?, column?, endLine?, endColumn?}` →
--- `{opened = true}`: opens the file (an error when it does not exist: no
--- file is created), puts the cursor at the line and column, centres it,
--- and selects up to `endLine`/`endColumn` (the column after the last
--- selected character; without `endColumn`, whole lines) in visual mode.
function M.open_file(params)
  params = type(params) == 'table' and params or {}
  if type(params.path) ~= 'string' or params.path == '' then
    return nil, 'editor_open_file needs a path'
  end
  local path = vim.fn.fnamemodify(params.path, ':p')
  local st = vim.loop.fs_stat(path)
  if not st then
    return nil, 'no such file: ' .. path
  elseif st.type ~= 'file' then
    return nil, path .. ' is not a file (' .. tostring(st.type) .. ')'
  end
  local win = target_window(buffer_of(path))
  api.nvim_set_current_win(win)
  if vim.fn.mode() ~= 'n' then
    vim.cmd('stopinsert')
  end
  if M.path_of(api.nvim_get_current_buf()) ~= path then
    local ok, err = pcall(vim.cmd, 'edit ' .. vim.fn.fnameescape(path))
    if not ok then
      return nil, 'cannot open ' .. path .. ': ' .. tostring(err)
    end
  end
  local buf = api.nvim_get_current_buf()
  local count = api.nvim_buf_line_count(buf)
  local function pos(line, col)
    line = math.max(1, math.min(line or 1, count))
    local text = api.nvim_buf_get_lines(buf, line - 1, line, false)[1] or ''
    return line, M.byte_col(text, col or 1)
  end
  if params.line then
    local l, c = pos(params.line, params.column)
    if params.endLine then
      local el = math.max(1, math.min(params.endLine, count))
      if params.endColumn then
        local _, ec = pos(el, math.max(1, params.endColumn - 1))
        api.nvim_win_set_cursor(0, { l, c })
        vim.cmd('normal! v')
        api.nvim_win_set_cursor(0, { el, ec })
      else
        api.nvim_win_set_cursor(0, { l, 0 })
        vim.cmd('normal! V')
        api.nvim_win_set_cursor(0, { el, 0 })
      end
    else
      api.nvim_win_set_cursor(0, { l, c })
    end
    vim.cmd('normal! zz')
  end
  return { opened = true }
end

--- The file buffer the user works in: the current window's, else the
--- buffer of the window they were in before (e.g. before the Qwen Code
--- terminal), else the alternate buffer.
function M.active_buffer()
  local cur = api.nvim_get_current_buf()
  if M.path_of(cur) then
    return cur
  end
  local prev = vim.fn.win_getid(vim.fn.winnr('#'))
  if prev ~= 0 and M.path_of(api.nvim_win_get_buf(prev)) then
    return api.nvim_win_get_buf(prev)
  end
  local alt = vim.fn.bufnr('#')
  if alt > 0 and M.path_of(alt) then
    return alt
  end
  return nil
end

--- editor_open_editors: `{}` → `{editors = [{path, active, dirty, language?}]}`,
--- the listed, loaded buffers with a file name.
function M.open_editors()
  local active = M.active_buffer()
  local out = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local path = vim.bo[buf].buflisted and api.nvim_buf_is_loaded(buf) and M.path_of(buf)
    if path then
      local e = { path = path, active = buf == active, dirty = vim.bo[buf].modified }
      if vim.bo[buf].filetype ~= '' then
        e.language = vim.bo[buf].filetype
      end
      out[#out + 1] = e
    end
  end
  return { editors = out }
end

-- The selection from byte positions (1-based lines, 0-based bytes; `e` on
-- the last selected byte) of `mode` ('v', 'V' or CTRL-V) in `buf`.
local function selection_of(buf, mode, s, e)
  if s[1] > e[1] or (s[1] == e[1] and s[2] > e[2]) then
    s, e = e, s
  end
  local lines = api.nvim_buf_get_lines(buf, s[1] - 1, e[1], false)
  if #lines == 0 then
    return nil
  end
  local first, last = lines[1], lines[#lines]
  local text, sc, ec
  if mode == 'V' then
    sc, ec = 1, vim.fn.strchars(last) + 1
    text = table.concat(lines, '\n')
  elseif mode == 'v' then
    local eb = math.min(e[2], math.max(#last - 1, 0))
    -- the end byte's whole character
    local stop = eb + 1
    while stop < #last and bit.band(last:byte(stop + 1), 0xC0) == 0x80 do
      stop = stop + 1
    end
    sc, ec = M.char_col(first, s[2]), M.char_col(last, stop)
    lines[#lines] = last:sub(1, stop)
    lines[1] = lines[1]:sub(s[2] + 1)
    if #lines == 1 then
      text = first:sub(s[2] + 1, stop)
    else
      text = table.concat(lines, '\n')
    end
  else -- blockwise: the columns between both corners on each line
    local l, r = math.min(s[2], e[2]), math.max(s[2], e[2])
    for i, line in ipairs(lines) do
      lines[i] = line:sub(l + 1, r + 1)
    end
    sc, ec = M.char_col(first, l), M.char_col(last, math.min(r, math.max(#last - 1, 0))) + 1
    text = table.concat(lines, '\n')
  end
  return {
    path = M.path_of(buf),
    text = require('qwen_companion.selection').cut_utf8(text, 1024 * 1024),
    start = { line = s[1], column = sc },
    ['end'] = { line = e[1], column = ec },
  }
end

--- editor_selection: `{}` → `{selection = …}`: the visual selection being
--- made in the current window, else the last one of the active file
--- buffer (its '< and '> marks), else null. `end` is the position just
--- after the last selected character.
function M.selection()
  local mode = api.nvim_get_mode().mode:sub(1, 1)
  local buf = api.nvim_get_current_buf()
  if (mode == 'v' or mode == 'V' or mode == '\22') and M.path_of(buf) then
    local a, b = vim.fn.getpos('v'), vim.fn.getpos('.')
    local sel = selection_of(buf, mode, { a[2], a[3] - 1 }, { b[2], b[3] - 1 })
    return { selection = sel or vim.NIL }
  end
  buf = M.active_buffer()
  if not buf then
    return { selection = vim.NIL }
  end
  local s, e = api.nvim_buf_get_mark(buf, '<'), api.nvim_buf_get_mark(buf, '>')
  if s[1] == 0 or e[1] == 0 then
    return { selection = vim.NIL }
  end
  local vmode = vim.fn.visualmode()
  local sel = selection_of(buf, vmode ~= '' and vmode or 'v', s, e)
  return { selection = sel or vim.NIL }
end

local HANDLERS = {
  editor_diagnostics = M.diagnostics,
  editor_open_file = M.open_file,
  editor_open_editors = M.open_editors,
  editor_selection = M.selection,
}

--- Offers the four capabilities on plugin host `host` (before its MCP
--- server starts: Qwen Code reads the tool list once). Returns true, or nil
--- and a message.
function M.offer(host)
  for _, name in ipairs(M.CAPABILITIES) do
    local fn = HANDLERS[name]
    local ok, err = host:handle(name, function(req)
      return fn(req.params)
    end)
    if not ok then
      return nil, err
    end
  end
  return true
end

return M
