-- qwen_companion.participant: Neovim joins Qwen Code's cross-session
-- messaging as one participant (kind `external`) per Neovim instance, so
-- Qwen sessions of this machine can `send_message` to the editor and the
-- editor can send to them.
--
--   :QwenSessions          pick a live session, type a message, send it
--   :[range]QwenSend[!] [text]  send the selected lines (! adds path:line
--                          context) or the text; asks for the session
--   :QwenSendQuickfix      send the quickfix list (build/test output)
--   :QwenMessages          the `Qwen messages` buffer (gf / <CR> opens path:line)
--   :QwenHeld              review held messages: release or deny
--   :QwenInboxPolicy {default|accept|hold|refuse}
--
-- Options (require("qwen_companion.participant").setup{…}, or the
-- vim.g.qwen_companion_participant_name / _inbox_policy variables): name
-- (default `nvim-<cwd basename>`, sanitised), inbox_policy
-- (`default` = the library's mode parity; `accept`, `hold`, `refuse`),
-- held_expiry (`1m`|`5m`|`10m`|`never`, library default), enabled (true).
--
-- Threading: the participant runs in the library's pull mode. A vim.uv
-- poll handle watches the library's event fd; its callback (main loop,
-- fast context) only pulls events into a list and schedules their handling,
-- where vim.notify and buffers may be used. No Lua function is ever a C
-- callback.

local ffi = require('ffi')
local capi = require('qwen_companion.capi')
local ext = require('qwen_companion.capi_ext')
local model = require('qwen_companion.sessions_model')

local api = vim.api
local uv = vim.uv or vim.loop

local M = {}

M.config = {
  enabled = true,
  name = nil,
  inbox_policy = 'default',
  held_expiry = nil,
  qwen_home = nil, -- $QWEN_HOME (the library's default) unless set
}

local P = nil -- the running participant
local MESSAGES = 'Qwen messages'

local notify = require('qwen_companion.notify')

local function setting(key)
  local v = M.config[key]
  local g = vim.g['qwen_companion_' .. (key == 'name' and 'participant_name' or key)]
  if g ~= nil and (v == nil or v == 'default') then
    v = g
  end
  return v
end

local function now_ms()
  local s, us = uv.gettimeofday()
  return s * 1000 + math.floor(us / 1000)
end

-- Our registered session as the library has it now (its id may have been
-- rotated since register): refreshed from qc_participant_sessions_json.
local function own_session(st)
  local list = ext.out_json(st.lib, 'qc_participant_sessions_json', st.p)
  if type(list) == 'table' and list[1] then
    st.session = list[1]
  end
  return st.session
end

--- The name this instance registers.
function M.name()
  local n = setting('name')
  if type(n) == 'string' and n ~= '' then
    return model.sanitise_name(n)
  end
  return model.participant_name(vim.fn.getcwd(-1, -1))
end

---------------------------------------------------------------------------
-- Events (pulled)
---------------------------------------------------------------------------

local function messages_buffer(create)
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_valid(b) and vim.b[b].qwen_messages then
      return b
    end
  end
  if not create then
    return nil
  end
  local b = api.nvim_create_buf(true, true)
  api.nvim_buf_set_name(b, MESSAGES)
  vim.bo[b].buftype, vim.bo[b].bufhidden, vim.bo[b].swapfile = 'nofile', 'hide', false
  vim.bo[b].filetype = 'qwenmessages'
  vim.b[b].qwen_messages = true
  vim.bo[b].modifiable = false
  for _, lhs in ipairs({ 'gf', '<CR>' }) do
    vim.keymap.set('n', lhs, function()
      local ok, err = M.open_ref_under_cursor()
      if not ok then
        notify(err, vim.log.levels.WARN)
      end
    end, { buffer = b, desc = 'Open the path:line under the cursor' })
  end
  return b
end

local function append_message(m)
  local b = messages_buffer(true)
  local lines = model.message_lines(m, os.date('%H:%M:%S'))
  vim.bo[b].modifiable = true
  local first = api.nvim_buf_line_count(b) == 1 and api.nvim_buf_get_lines(b, 0, 1, false)[1] == ''
  api.nvim_buf_set_lines(b, first and 0 or -1, -1, false, lines)
  vim.bo[b].modifiable = false
end

local function on_message(st, m)
  st.messages[#st.messages + 1] = m
  append_message(m)
  local refs = model.file_refs(m.text or m.content)
  local text = (m.text or m.content or ''):gsub('%s+', ' ')
  if #text > 200 then
    text = text:sub(1, 197) .. '...'
  end
  notify(
    string.format('message from %s: %s%s', m.fromName or m.from or '?', text, #refs > 0 and '  (:QwenMessages, gf opens it)' or ''),
    vim.log.levels.INFO
  )
end

local function on_receipt(st, r)
  local s = st.sent[r.msgId]
  if s then
    s.state = r.status
    s.last = r
  end
  local text, warn = model.receipt_text(r)
  notify(text, warn and vim.log.levels.WARN or vim.log.levels.INFO)
end

local function on_held(st, held)
  local known = {}
  for _, h in ipairs(st.held) do
    known[h.msgId] = true
  end
  st.held = held
  for _, h in ipairs(held) do
    if not known[h.msgId] then
      notify(string.format('message from %s held for review: :QwenHeld', h.fromName or h.from or '?'), vim.log.levels.WARN)
    end
  end
end

local function handle(st, ev)
  if P ~= st or type(ev) ~= 'table' then
    return
  end
  st.events = st.events + 1
  if ev.type == 'message' then
    on_message(st, ev)
  elseif ev.type == 'receipt' then
    on_receipt(st, ev)
  elseif ev.type == 'held' then
    on_held(st, ev.held or {})
  elseif ev.type == 'log' then
    require('qwen_companion.log').event('participant', ev)
  end
  for _, fn in ipairs(M._listeners) do
    pcall(fn, ev)
  end
end

M._listeners = {}

--- Calls `fn(event)` after each pulled event is handled (tests, other modules).
function M.on_event(fn)
  M._listeners[#M._listeners + 1] = fn
end

-- Pulls every waiting event (the fd stays readable until the queue is empty).
local function drain(st)
  local got = {}
  while P == st do
    local json, err = ext.out_string(st.lib, 'qc_participant_next_event', st.p)
    if json == nil then
      if err then
        st.last_error = err
      end
      break
    end
    local ok, ev = pcall(vim.json.decode, json, { luanil = { object = true, array = true } })
    if ok then
      got[#got + 1] = ev
    else
      st.last_error = 'bad event: ' .. tostring(ev)
    end
  end
  if #got > 0 then
    vim.schedule(function()
      for _, ev in ipairs(got) do
        local ok, err = true, nil
        if not require('qwen_companion.log').event('participant', ev) then
          ok, err = pcall(handle, st, ev)
        end
        if not ok then
          st.last_error = err
        end
      end
    end)
  end
end

---------------------------------------------------------------------------
-- Lifecycle
---------------------------------------------------------------------------

--- Starts (registers) the participant. Returns true, or nil and a message.
function M.start()
  if P then
    return true
  end
  if M.config.enabled == false then
    return nil, 'the participant is disabled (setup{ participant = { enabled = false } })'
  end
  local pok, policy = model.policy(setting('inbox_policy'))
  if not pok then
    return nil, policy
  end
  local lib, lerr = ext.load(capi.library_path(require('qwen_companion').config.lib))
  if not lib then
    return nil, lerr
  end
  local cfg = { kind = 'external', inboundPolicy = policy, heldExpiry = setting('held_expiry') }
  if setting('qwen_home') then
    cfg.qwenHome = vim.fn.expand(setting('qwen_home'))
  end
  local out = ffi.new('qc_participant *[1]')
  local ok, err = capi.call(lib, 'qc_participant_new', vim.json.encode(cfg), out)
  if not ok then
    return nil, err
  end
  local st = { lib = lib, p = out[0], sent = {}, held = {}, messages = {}, events = 0 }
  local fd = ffi.new('int32_t[1]')
  ok, err = capi.call(lib, 'qc_participant_enable_events', st.p, fd)
  if ok then
    -- The library's log lines arrive as `log` events (written to the log file).
    local lok, lerr = capi.optional_call(lib, 'qc_participant_enable_log_events', st.p, capi.log.INFO)
    if not lok then
      st.last_error = lerr
    end
    -- a poll on the descriptor, or a timer on Windows (platform.watch_events)
    st.poll, err = require('qwen_companion.platform').watch_events(tonumber(fd[0]), function()
      local dok, derr = pcall(drain, st)
      if not dok then
        st.last_error = derr
      end
    end)
    ok = st.poll ~= nil
  end
  if not ok then
    lib.qc_participant_free(st.p)
    return nil, 'cannot watch the participant: ' .. tostring(err)
  end
  P = st
  local cwd = vim.fn.getcwd(-1, -1)
  local session, rerr = ext.out_json(lib, 'qc_participant_register', st.p, vim.json.encode({ name = M.name(), cwd = cwd }))
  if not session then
    M.stop()
    return nil, rerr
  end
  st.session = session
  api.nvim_create_autocmd('VimLeavePre', {
    group = api.nvim_create_augroup('QwenCompanionParticipant', { clear = true }),
    callback = function()
      M.stop()
    end,
  })
  return true
end

--- Unregisters and frees the participant (held messages expire).
function M.stop()
  local st = P
  if not st then
    return nil, 'not running'
  end
  P = nil
  if st.poll then
    st.poll:stop()
    if not st.poll:is_closing() then
      st.poll:close()
    end
  end
  st.lib.qc_participant_free(st.p)
  pcall(api.nvim_del_augroup_by_name, 'QwenCompanionParticipant')
  return true
end

-- For tests: the raw state ({lib, p, session, …}) or nil.
function M._state()
  return P
end

--- The running participant's state (nil when stopped).
function M.status()
  if not P then
    return nil
  end
  own_session(P)
  return {
    name = P.session and P.session.name,
    session = vim.deepcopy(P.session),
    held = vim.deepcopy(P.held),
    messages = #P.messages,
    events = P.events,
    last_error = P.last_error,
  }
end

--- The variables for a process Neovim starts (a terminal running qwen):
--- `QWEN_CODE_MESSAGING_SOCKET` / `_TOKEN` of our session, so its messages
--- to Neovim arrive with origin `own-process`. Empty when not running.
function M.child_env()
  if not (P and P.session) then
    return {}
  end
  return ext.out_json(P.lib, 'qc_participant_child_env_json', P.p, own_session(P).sessionId) or {}
end

local function running()
  if P then
    return P
  end
  local ok, err = M.start()
  if not ok then
    return nil, err
  end
  return P
end

---------------------------------------------------------------------------
-- Sessions and sending
---------------------------------------------------------------------------

--- The live sessions a message can go to (fresh registry read), as
--- sessions_model.session_items gives them.
function M.sessions()
  local st, err = running()
  if not st then
    return nil, err
  end
  local records, lerr = ext.out_json(st.lib, 'qc_participant_list_json', st.p)
  if not records then
    return nil, lerr
  end
  local own = {}
  for _, s in ipairs(ext.out_json(st.lib, 'qc_participant_sessions_json', st.p) or {}) do
    own[#own + 1] = s.sessionId
  end
  return model.session_items(records, own, now_ms(), (vim.uv or vim.loop).os_homedir())
end

--- Sends `text` to `address`. Returns the send result (`{msgId, address,
--- toSessionId}`), or nil and the library's message (a refusal the library
--- makes before sending, rate or duplicate, says why).
function M.send(address, text)
  local st, err = running()
  if not st then
    return nil, err
  end
  if type(text) ~= 'string' or vim.trim(text) == '' then
    return nil, 'nothing to send'
  end
  local res, serr = ext.out_json(st.lib, 'qc_participant_send', st.p, vim.json.encode({ to = address, content = text }))
  if not res then
    return nil, serr
  end
  st.sent[res.msgId] = { address = res.address or address, state = 'pending' }
  return res
end

--- The state of a message we sent (`{msgId, address, state, last?}`).
function M.send_state(msg_id)
  if not P then
    return nil, 'not running'
  end
  return ext.out_json(P.lib, 'qc_participant_send_state_json', P.p, msg_id)
end

--- Asks for a session (vim.ui.select), then calls `fn(item)`.
function M.pick_session(prompt, fn)
  local items, err = M.sessions()
  if not items then
    notify(err, vim.log.levels.ERROR)
    return
  end
  if #items == 0 then
    notify('no other live Qwen session (start `qwen` in a terminal)', vim.log.levels.WARN)
    return
  end
  vim.ui.select(items, {
    prompt = prompt or 'Qwen session',
    format_item = function(it)
      return it.label
    end,
  }, function(item)
    if item then
      fn(item)
    end
  end)
end

--- Sends with the result shown to the user.
function M.send_and_report(address, text)
  local res, err = M.send(address, text)
  if not res then
    notify('not sent to ' .. address .. ': ' .. tostring(err), vim.log.levels.ERROR)
    return nil, err
  end
  notify(string.format('message to %s: pending', res.address or address))
  return res
end

--- :QwenSessions: pick a session, type the message, send it.
function M.sessions_command()
  M.pick_session('Send to Qwen session', function(item)
    vim.ui.input({ prompt = 'Message to ' .. item.address .. ': ' }, function(text)
      if text and vim.trim(text) ~= '' then
        M.send_and_report(item.address, text)
      end
    end)
  end)
end

--- The text :QwenSend sends for a command invocation (`a` as
--- nvim_create_user_command gives it), or nil when it must be typed.
function M.send_text(a)
  if a.args and a.args ~= '' then
    return a.args
  end
  if a.range and a.range > 0 then
    local buf = api.nvim_get_current_buf()
    local lines = api.nvim_buf_get_lines(buf, a.line1 - 1, a.line2, false)
    local text = table.concat(lines, '\n')
    if a.bang then
      local path = api.nvim_buf_get_name(buf)
      path = path ~= '' and vim.fn.fnamemodify(path, ':~:.') or '[No Name]'
      text = model.with_context(text, path, a.line1, a.line2, vim.bo[buf].filetype)
    end
    return text
  end
  return nil
end

function M.send_command(a)
  local text = M.send_text(a)
  M.pick_session('Send to Qwen session', function(item)
    if text then
      M.send_and_report(item.address, text)
      return
    end
    vim.ui.input({ prompt = 'Message to ' .. item.address .. ': ' }, function(t)
      if t and vim.trim(t) ~= '' then
        M.send_and_report(item.address, t)
      end
    end)
  end)
end

--- The quickfix list as text (nil when it is empty).
function M.quickfix_text()
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  if not qf.items or #qf.items == 0 then
    return nil
  end
  local items = {}
  for _, it in ipairs(qf.items) do
    local name = (it.bufnr and it.bufnr > 0) and vim.fn.fnamemodify(vim.fn.bufname(it.bufnr), ':~:.') or nil
    items[#items + 1] = { filename = name, lnum = it.lnum, col = it.col, type = it.type, text = it.text }
  end
  return model.quickfix_text(qf.title, items)
end

function M.send_quickfix_command()
  local text = M.quickfix_text()
  if not text then
    notify('the quickfix list is empty (:make, :grep, :copen)', vim.log.levels.WARN)
    return
  end
  M.pick_session('Send the quickfix list to', function(item)
    M.send_and_report(item.address, text)
  end)
end

---------------------------------------------------------------------------
-- Received messages and held review
---------------------------------------------------------------------------

--- Opens (in the current window) the `Qwen messages` buffer.
function M.messages_command()
  local b = messages_buffer(true)
  api.nvim_set_current_buf(b)
  return b
end

--- Opens a `{path, line, col?}` reference: relative paths against the
--- current directory; `:edit` then the line.
function M.open_ref(ref)
  local path = vim.fn.fnamemodify(vim.fn.expand(ref.path), ':p')
  if vim.fn.filereadable(path) ~= 1 then
    return nil, 'no such file: ' .. ref.path
  end
  if api.nvim_get_current_buf() == messages_buffer(false) and #api.nvim_list_wins() == 1 then
    vim.cmd('split')
  elseif api.nvim_get_current_buf() == messages_buffer(false) then
    vim.cmd('wincmd p')
  end
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  local last = api.nvim_buf_line_count(0)
  api.nvim_win_set_cursor(0, { math.max(1, math.min(ref.line or 1, last)), math.max(0, (ref.col or 1) - 1) })
  return true
end

--- gf in the messages buffer: the reference under the cursor, else the
--- first one of the line.
function M.open_ref_under_cursor()
  local line = api.nvim_get_current_line()
  local col = api.nvim_win_get_cursor(0)[2] + 1
  local ref = model.file_ref_at(line, col) or model.file_refs(line)[1]
  if not ref then
    return nil, 'no path:line here'
  end
  return M.open_ref(ref)
end

--- The messages held for review (fresh from the library).
function M.held()
  if not P then
    return {}
  end
  local held = ext.out_json(P.lib, 'qc_participant_held_json', P.p)
  if held then
    P.held = held
  end
  return P.held
end

--- Releases (`release` true) or denies a held message.
function M.decide(msg_id, release)
  if not P then
    return nil, 'not running'
  end
  return capi.call(P.lib, release and 'qc_participant_release' or 'qc_participant_deny', P.p, msg_id)
end

--- :QwenHeld: pick a held message, then release or deny it.
function M.held_command()
  local held = M.held()
  if #held == 0 then
    notify('no message is held')
    return
  end
  local now = now_ms()
  vim.ui.select(held, {
    prompt = 'Held messages',
    format_item = function(h)
      return model.held_label(h, now)
    end,
  }, function(h)
    if not h then
      return
    end
    vim.ui.select({ 'release', 'deny' }, { prompt = 'Message from ' .. (h.fromName or h.from or '?') }, function(choice)
      if choice then
        local ok, err = M.decide(h.msgId, choice == 'release')
        notify(ok and (choice == 'release' and 'released' or 'denied') or tostring(err), ok and vim.log.levels.INFO or vim.log.levels.ERROR)
      end
    end)
  end)
end

--- Changes the inbox policy of the running participant (held messages are
--- judged again by the library).
function M.set_policy(value)
  local ok, policy = model.policy(value)
  if not ok then
    return nil, policy
  end
  M.config.inbox_policy = value
  if not P or not P.session then
    return true
  end
  local sid = own_session(P).sessionId
  local text, err = ext.out_string(P.lib, 'qc_participant_inbound_settings_json', P.p, sid)
  if not text then
    return nil, err
  end
  local cur = vim.json.decode(text) -- nulls kept (vim.NIL): every field goes back as it was
  cur.policy = policy or vim.NIL
  return capi.call(P.lib, 'qc_participant_update_inbound', P.p, sid, vim.json.encode(cur))
end

--- Sets options; a bad inbox_policy is an error and changes nothing.
function M.setup(opts)
  local config = vim.tbl_extend('force', M.config, opts or {})
  local ok, err = model.policy(config.inbox_policy)
  if not ok then
    error('qwen-companion: ' .. err, 2)
  end
  M.config = config
end

return M
