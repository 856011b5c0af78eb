-- qwen_companion.diff_view: the views of Qwen Code's proposed diffs (a tab
-- with the file and the `qwen-diff://` proposal side by side): the
-- proposal's text, filling and closing a view, the status line that names
-- the proposing CLI. The diffs' state and decisions stay in
-- qwen_companion (init.lua).

local api = vim.api

local M = {}

--- The text of diff `d`'s proposal buffer (the proposal when the buffer is
--- gone), with the proposal's line ends.
function M.diff_text(d)
  if not (d.buf and api.nvim_buf_is_valid(d.buf)) then
    return d.proposed
  end
  local lines = api.nvim_buf_get_lines(d.buf, 0, -1, false)
  local nl = d.crlf and '\r\n' or '\n'
  local text = table.concat(lines, nl)
  if d.eol then
    text = text .. nl
  end
  return text
end

--- Closes the diff view (tab) of `d`; `d` must already be forgotten, so the
--- buffer's BufWipeout does not report it as closed by the user.
function M.close_view(d)
  local tab = d.tab
  if tab and api.nvim_tabpage_is_valid(tab) and #api.nvim_list_tabpages() > 1 then
    for _, win in ipairs(api.nvim_tabpage_list_wins(tab)) do
      if api.nvim_win_is_valid(win) then
        pcall(api.nvim_win_close, win, true)
      end
    end
  elseif tab and api.nvim_tabpage_is_valid(tab) then
    for _, win in ipairs(api.nvim_tabpage_list_wins(tab)) do
      if api.nvim_win_get_buf(win) ~= d.buf then
        api.nvim_win_call(win, function()
          vim.cmd('diffoff')
        end)
      end
    end
  end
  for _, b in ipairs({ d.buf, d.original_scratch }) do
    if b and api.nvim_buf_is_valid(b) then
      pcall(api.nvim_buf_delete, b, { force = true })
    end
  end
end

--- `content` as lines, with whether it used CRLF and ended with a newline.
function M.split_content(content)
  local crlf = content:find('\r\n', 1, true) ~= nil
  if crlf then
    content = content:gsub('\r\n', '\n')
  end
  local eol = content:sub(-1) == '\n'
  if eol then
    content = content:sub(1, -2)
  end
  return vim.split(content, '\n', { plain = true }), crlf, eol
end

--- Puts proposal `content` into `d`'s buffer (unmodified).
function M.fill(d, content)
  local lines, crlf, eol = M.split_content(content)
  d.proposed, d.crlf, d.eol = content, crlf, eol
  api.nvim_buf_set_lines(d.buf, 0, -1, false, lines)
  vim.bo[d.buf].modified = false
end

-- The library no longer knows the diff of a view (QC_NOT_FOUND): Qwen Code
-- gave up on it. Typically its closeDiff timed out while Neovim's main loop
-- was busy: a timed-out request is never handed to Neovim, so the view stays
-- until the user decides or closes it; then it is closed and nothing is sent.
function M.orphan_message(d, err)
  return string.format(
    '%s no longer waits for the diff of %s (e.g. its closeDiff timed out); the view is closed. (%s)',
    M.proposer(d.cli),
    vim.fn.fnamemodify(d.path, ':~:.'),
    tostring(err)
  )
end

-- The proposing CLI for the companion's `cli` setting.
local PROPOSERS = { qwen = 'Qwen Code', gemini = 'Gemini CLI', both = 'The CLI' }

--- Who proposes the diffs of a companion serving `cli` ('qwen' (or nil),
--- 'gemini', 'both'): 'Qwen Code', 'Gemini CLI', or 'The CLI' for both.
function M.proposer(cli)
  return PROPOSERS[cli or 'qwen'] or PROPOSERS.qwen
end

--- The name of the CLI that proposed a diff, shown when more than one CLI is
--- connected (`meta`: the openDiff event's `session` and `clients`), else nil.
function M.label(meta)
  if type(meta) ~= 'table' or type(meta.clients) ~= 'number' or meta.clients < 2 then
    return nil
  end
  local s = meta.session
  if type(s) ~= 'table' or type(s.label) ~= 'string' or s.label == '' then
    return nil
  end
  return s.label
end

--- The status line of a proposal window (`label`: the proposing CLI, or nil;
--- `cli`: the companion's setting, see M.proposer).
function M.statusline(path, label, cli)
  local name = vim.fn.fnamemodify(path, ':~:.')
  local text = M.proposer(cli) .. ' proposes ' .. name .. (label and (' (from ' .. label .. ')') or '')
    .. '  :w accept · :QwenDiffReject'
  return (text:gsub('%%', '%%%%'))
end

--- Sets the status line of every window showing `d`'s proposal.
function M.label_view(d)
  if not (d.buf and api.nvim_buf_is_valid(d.buf)) then
    return
  end
  for _, win in ipairs(vim.fn.win_findbuf(d.buf)) do
    vim.wo[win].statusline = M.statusline(d.path, d.label, d.cli)
  end
end

return M
