-- What the Neovim sides of the real-CLI e2e tests (test_e2e_nvim.lua for Qwen Code,
-- test_e2e_nvim_gemini.lua for Gemini CLI) share:
--   local E = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/e2e_nvim.lua')
--   E.echo_notify(list)      vim.notify prints each message (and appends it to list, if given)
--   E.requests(path, from)   the fake model's log at path: its JSON lines after the first
--                            `from`, decoded (each with its raw line as _raw)
--   E.screen(buf)            a buffer's lines as one string
--   E.submit(job, text)      types text into the terminal job, then Enter
--   E.run_checked(run, C)    runs run(); a Lua error is the failed check no-lua-error (C:
--                            checks.lua); the companion is stopped afterwards
local api = vim.api
local M = {}

function M.echo_notify(list)
  vim.notify = function(msg)
    if list then
      list[#list + 1] = tostring(msg)
    end
    io.stdout:write('notify: ' .. tostring(msg) .. '\n')
  end
end

function M.requests(path, from)
  local out = {}
  local f = io.open(path, 'r')
  if not f then
    return out
  end
  local i = 0
  for line in f:lines() do
    i = i + 1
    if i > (from or 0) then
      local ok, v = pcall(vim.json.decode, line)
      if ok and type(v) == 'table' then
        v._raw = line
        out[#out + 1] = v
      end
    end
  end
  f:close()
  return out
end

function M.screen(buf)
  return table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

-- Types `text` into the job, then Enter, as a user would: the CLIs' terminal
-- UIs take a pasted line and the Enter apart.
function M.submit(job, text)
  vim.fn.chansend(job, text)
  vim.wait(500)
  vim.fn.chansend(job, '\r')
end

function M.run_checked(run, C)
  C.run_guarded(run, 'no-lua-error')
end

return M
