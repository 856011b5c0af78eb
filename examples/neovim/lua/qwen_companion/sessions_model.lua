-- qwen_companion.sessions_model: the pure logic of Neovim's cross-session
-- participant (no vim API call except vim.json / vim.split, so the headless
-- tests run it directly): the participant's name, how a live session is
-- shown, the text sent with :QwenSend! and :QwenSendQuickfix, receipts, and
-- the `path:line` references found in received messages.

local M = {}

--- Longest session name the library writes (code points); longer names are
--- cut there by the library, so the derived name is cut first (readably).
M.MAX_NAME = 40

--- Receipt states that end a message's life (the library's final states).
M.FINAL = { delivered = true, denied = true, refused = true, expired = true, misaddressed = true, dropped = true }

--- Inbox policies of the `inbox_policy` option: `default` is the library's
--- mode parity (nil policy), the others are passed as `inboundPolicy`.
M.POLICIES = { 'default', 'accept', 'hold', 'refuse' }

--- The library's `inboundPolicy` for an `inbox_policy` value, or nil and a
--- message for an unknown one. `default` (or nil) gives vim.NIL-free `nil`.
function M.policy(value)
  if value == nil or value == 'default' then
    return true, nil
  end
  for _, p in ipairs(M.POLICIES) do
    if p == value then
      return true, value
    end
  end
  return false, string.format("inbox_policy must be one of default, accept, hold, refuse (got %s)", tostring(value))
end

--- `nvim-<basename of cwd>`, sanitised to what an address can carry
--- unquoted: letters, digits, `.`, `_` and `-` (every other run becomes one
--- `-`), lower case, at most MAX_NAME bytes, never empty.
function M.participant_name(cwd, prefix)
  prefix = prefix or 'nvim'
  local base = (cwd or ''):gsub('/+$', ''):match('([^/]*)$') or ''
  return M.sanitise_name(prefix .. '-' .. base)
end

function M.sanitise_name(name)
  local s = tostring(name or ''):lower():gsub('[^%w%._%-]+', '-'):gsub('%-%-+', '-'):gsub('^[-.]+', ''):gsub('[-.]+$', '')
  if #s > M.MAX_NAME then
    s = s:sub(1, M.MAX_NAME):gsub('[-.]+$', '')
  end
  if s == '' then
    s = 'nvim'
  end
  return s
end

--- A short age: `42s`, `5m`, `3h`, `2d` (`now_ms` and `started_ms` in ms).
function M.age(now_ms, started_ms)
  if type(started_ms) ~= 'number' then
    return '?'
  end
  local s = math.max(0, math.floor((now_ms - started_ms) / 1000))
  if s < 60 then
    return s .. 's'
  elseif s < 3600 then
    return math.floor(s / 60) .. 'm'
  elseif s < 86400 then
    return math.floor(s / 3600) .. 'h'
  end
  return math.floor(s / 86400) .. 'd'
end

local function home_relative(path, home)
  if type(path) ~= 'string' then
    return '?'
  end
  if home and home ~= '' and path:sub(1, #home) == home and (path:sub(#home + 1, #home + 1):match('^[/\\]$') or #path == #home) then
    return '~' .. path:sub(#home + 1)
  end
  return path
end

--- Milliseconds of a record's `startedAt` (ISO 8601 text or a number).
function M.started_ms(v)
  if type(v) == 'number' then
    return v < 1e11 and v * 1000 or v
  end
  if type(v) ~= 'string' then
    return nil
  end
  local y, mo, d, h, mi, s, frac = v:match('^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)(%.?%d*)')
  if not y then
    return nil
  end
  -- days from civil (UTC), no os.time (local time zone)
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo <= 2 then
    y = y - 1
  end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  local ms = ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60 + tonumber(s)
  ms = ms * 1000 + math.floor((tonumber('0' .. frac) or 0) * 1000 + 0.5)
  return ms
end

--- The sessions a message can go to: every live record of the registry
--- (`qc_participant_list_json`) except our own, newest first, each with the
--- address that reaches it (`name [ref]`, or `[ref]` without a name) and
--- the line vim.ui.select shows: name, ref, cwd, kind, age.
function M.session_items(records, own_session_ids, now_ms, home)
  local own = {}
  for _, id in ipairs(own_session_ids or {}) do
    own[id] = true
  end
  local items = {}
  for _, r in ipairs(records or {}) do
    if type(r) == 'table' and not own[r.sessionId] and r.ref then
      local name = (type(r.name) == 'string' and r.name ~= '') and r.name or nil
      local kind = r.kind or 'qwen' -- Qwen's own records carry no kind
      items[#items + 1] = {
        address = name and (name .. ' [' .. r.ref .. ']') or ('[' .. r.ref .. ']'),
        name = name,
        ref = r.ref,
        cwd = r.cwd,
        kind = kind,
        reachable = r.reachable ~= false,
        label = string.format(
          '%s [%s]  %s  %s  %s%s',
          name or '(unnamed)',
          r.ref,
          home_relative(r.cwd, home),
          kind,
          M.age(now_ms, M.started_ms(r.startedAt)),
          r.reachable == false and '  (no inbox)' or ''
        ),
      }
    end
  end
  return items
end

--- The text :QwenSend! sends: the selected lines with the file and line
--- range as context, as a fenced block the model reads well.
function M.with_context(text, path, first, last, filetype)
  local where = first == last and string.format('%s:%d', path, first) or string.format('%s:%d-%d', path, first, last)
  return string.format('%s\n```%s\n%s\n```', where, filetype or '', text)
end

--- The quickfix list (vim.fn.getqflist() items, `bufname` resolved by the
--- caller into `filename`) as the text :QwenSendQuickfix sends:
--- `path:line:col: [E] text` per entry, the list's title first.
function M.quickfix_text(title, items)
  local lines = {}
  if title and title ~= '' then
    lines[1] = title
  end
  for _, it in ipairs(items or {}) do
    local loc = it.filename or ''
    if (it.lnum or 0) > 0 then
      loc = loc .. ':' .. it.lnum
      if (it.col or 0) > 0 then
        loc = loc .. ':' .. it.col
      end
    end
    local kind = (it.type and it.type ~= '') and ('[' .. it.type .. '] ') or ''
    local text = (it.text or ''):gsub('\n', ' ')
    if loc ~= '' then
      lines[#lines + 1] = loc .. ': ' .. kind .. text
    else
      lines[#lines + 1] = kind .. text
    end
  end
  return table.concat(lines, '\n')
end

--- What the user is told about a receipt (`{msgId,address,status,reason?,
--- dropReason?}`), and whether it is a warning.
function M.receipt_text(r)
  local to = r.address or '?'
  local st = r.status or r.state or '?'
  local why = r.reason or r.dropReason
  local warn = st == 'refused' or st == 'dropped' or st == 'denied' or st == 'expired' or st == 'misaddressed'
  return string.format('message to %s: %s%s', to, st, why and (' (' .. tostring(why) .. ')') or ''), warn
end

-- A reference: path characters (`/` and, for Windows paths, `\`), `:line`, `:col`.
local REF = '([%w%._/\\~%-]+):(%d+):?(%d*)'

--- The `path:line` (or `path:line:col`) references of `text`, in order,
--- without duplicates: `{ {path=, line=, col=} }`. A path has a `/` (or a
--- `\`) or an extension, so times (`10:30`) and URLs (`http://x:80`) are not
--- taken. A Windows drive (`C:\src\a.lua:3`) stays part of the path.
function M.file_refs(text)
  local refs, seen = {}, {}
  text = tostring(text or '')
  local init = 1
  while true do
    local s, e, path, line, col = text:find(REF, init)
    if not s then
      break
    end
    init = e + 1
    local drive = s > 2 and text:sub(s - 2, s - 1):match('^%a:$') and (s == 3 or not text:sub(s - 3, s - 3):match('[%w_]'))
    if drive and path:find('^[\\/]') then
      path = text:sub(s - 2, s - 1) .. path
    end
    local ok = (path:find('[/\\]') or path:find('%.[%a][%w]*$')) and not path:find('^%d+$')
    if ok and not path:find('^//') then
      local key = path .. ':' .. line
      if not seen[key] then
        seen[key] = true
        refs[#refs + 1] = { path = path, line = tonumber(line), col = tonumber(col) }
      end
    end
  end
  return refs
end

--- The reference under column `col` (1-based byte) of `line`, else nil.
function M.file_ref_at(line, col)
  local init = 1
  while true do
    local s, e, path, lnum, c = line:find(REF, init)
    if not s then
      return nil
    end
    if col >= s - 2 and col <= e then
      local refs = M.file_refs(line:sub(math.max(1, s - 3), e)) -- with a drive letter before it, if any
      if refs[1] and (col >= s or refs[1].path:match('^%a:')) then
        return refs[1]
      end
    end
    init = e + 1
  end
end

--- The lines of one received message in the `Qwen messages` buffer:
--- a header (time, sender's name and ref, origin) and the display text
--- (neutralised by the library), indented.
function M.message_lines(m, clock)
  local from = m.fromName or m.from or 'unknown sender'
  local origin = m.origin or 'peer'
  if origin == 'controller' and m.controllerLabel then
    origin = origin .. ': ' .. m.controllerLabel
  end
  local out = { string.format('── %s  from %s  (%s)  %s', clock or '', from, origin, m.msgId or '') }
  for _, l in ipairs(vim.split(m.text or m.content or '', '\n', { plain = true })) do
    out[#out + 1] = '  ' .. l
  end
  return out
end

--- One line per held message for vim.ui.select.
function M.held_label(h, now_ms)
  local from = h.fromName or h.from or '?'
  local text = (h.text or h.content or ''):gsub('%s+', ' ')
  if #text > 60 then
    text = text:sub(1, 57) .. '...'
  end
  local exp = ''
  local at = M.started_ms(h.expiresAt)
  if at then
    exp = '  expires in ' .. M.age(at, now_ms)
  end
  return string.format('%s (%s, %s): %s%s', from, h.origin or 'peer', h.cause or 'held', text, exp)
end

return M
