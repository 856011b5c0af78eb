-- qwen_companion.prompt: :QwenAdd, "add to the prompt": types a reference to
-- a file (and a line range) into the agent terminal the plugin manages
-- (qwen_companion.terminal) that was used last, Qwen Code's or Gemini CLI's
-- (both take the same `@path` syntax), as a user would type it, without Enter:
--
--   @src/app.py                 the file (Qwen Code reads its whole content)
--   @src/app.py (lines 10-20)   a line range: Qwen Code has no syntax for
--                               lines, so the range is told in words
--
-- The path is relative to the terminal's working folder (qwen's workspace),
-- with a backslash before each character that would end the CLI's `@`
-- reference (space, quotes, brackets, `,;!?` …). On Windows the CLIs do not
-- take such escapes: a path with one of those characters cannot be
-- referenced, and :QwenAdd says so instead of typing a broken reference.

local platform = require('qwen_companion.platform')

local M = {}

-- The characters a backslash goes before (Qwen Code's escapePath, POSIX).
M.SPECIAL = '[ \t%(%)%[%]{};|%*%?%$`\'"#&<>!~,]'

--- `path` with a backslash before each character of M.SPECIAL.
function M.escape(path)
  return (path:gsub(M.SPECIAL, '\\%0'))
end

local function separators(p, os_name)
  if platform.is_windows(os_name) then
    return (p:gsub('\\', '/'))
  end
  return p
end

--- `path` relative to `root` when inside it (both absolute), else nil.
function M.relative(path, root, os_name)
  local p, r = separators(path, os_name), separators(root, os_name):gsub('/+$', '')
  local win = platform.is_windows(os_name)
  local pc, rc = win and p:lower() or p, win and r:lower() or r
  if r == '' then -- the root folder itself
    return p:sub(2)
  end
  if pc:sub(1, #rc + 1) == rc .. '/' and #p > #r + 1 then
    return p:sub(#r + 2)
  end
  return nil
end

--- The text to type for `path` (absolute) in a qwen whose working folder
--- is `root`, with lines `l1`..`l2` when given: `@<relative path>` (escaped)
--- and ` (lines A-B)`, then a space. Returns the text, or nil and a message
--- (outside the workspace; a character the CLI on Windows cannot take).
--- `cli_name` names the CLI in those messages (default 'Qwen Code').
function M.reference(path, root, l1, l2, os_name, cli_name)
  cli_name = cli_name or 'Qwen Code'
  local rel = M.relative(path, root, os_name)
  if not rel then
    return nil, string.format("%s is outside the CLI's workspace (%s): %s only reads files inside it", path, root,
      cli_name)
  end
  if platform.is_windows(os_name) then
    rel = rel:gsub('\\', '/')
    if rel:find(M.SPECIAL) then
      return nil, string.format('%s has a character %s on Windows cannot take in an @ reference'
        .. ' (space, quote, bracket or one of ,;!?*$#&<>|~); rename it or attach it another way', rel, cli_name)
    end
  else
    rel = M.escape(rel)
  end
  local text = '@' .. rel
  if l1 then
    if l2 and l2 < l1 then
      l1, l2 = l2, l1
    end
    text = string.format('%s (lines %d-%d)', text, l1, l2 or l1)
  end
  return text .. ' '
end

--- :QwenAdd: types the reference of `opts.path` (default: the current
--- buffer's file) with `opts.line1`..`opts.line2` (when `opts.range` is not
--- 0) into the agent terminal used last (terminal.last_used(): Qwen Code's
--- or Gemini CLI's, whichever was started, focused or entered most
--- recently), then focuses it. Returns the typed text and the agent
--- ('qwen' or 'gemini'), or nil and a message (nothing typed).
function M.add(opts)
  opts = opts or {}
  local term = require('qwen_companion.terminal')
  local agent = term.last_used()
  if not agent then
    return nil, 'no Qwen Code or Gemini CLI terminal is running: start one with :QwenToggle or :GeminiToggle'
      .. ' (or :QwenRun, :GeminiRun), then add again'
  end
  local t = term.current(agent)
  local cli_name = term.AGENTS[agent].name
  local path = opts.path
  local buf = vim.api.nvim_get_current_buf()
  if path == nil or path == '' then
    if vim.bo[buf].buftype ~= '' or vim.api.nvim_buf_get_name(buf) == '' then
      return nil, 'this buffer is not a file (:QwenAdd adds the current file, or :QwenAdd PATH)'
    end
    path = vim.api.nvim_buf_get_name(buf)
  else
    path = vim.fn.expand(path)
  end
  path = vim.fn.fnamemodify(path, ':p')
  if not (vim.loop.fs_stat(path)) then
    return nil, 'no such file: ' .. path .. (opts.path and '' or ' (write the buffer first)')
  end
  local l1, l2
  if opts.range and opts.range > 0 then
    l1, l2 = opts.line1, opts.line2
  end
  local text, err = M.reference(path:gsub('/$', ''), t.cwd, l1, l2, nil, cli_name)
  if not text then
    return nil, err
  end
  local ok, serr = term.send(text, agent)
  if not ok then
    return nil, serr
  end
  term.focus(agent)
  return text, agent
end

return M
