-- The checks a Lua test file of tests/neovim reports to run.sh, which prints
-- and counts them (report_checks): {"checks": [[name, ok, detail], ...]}.
--   local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
--   C.check(name, ok, detail)   detail is kept (vim.inspect) only when not ok
--   C.finish(path)              writes the file and quits Neovim (C.write: only writes)
local M = { list = {} }

function M.check(name, ok, detail)
  M.list[#M.list + 1] = { name, ok and true or false, (not ok and detail ~= nil) and vim.inspect(detail) or '' }
end

function M.write(path)
  local f = assert(io.open(path, 'w'))
  f:write(vim.fn.json_encode({ checks = M.list }))
  f:close()
end

function M.finish(path)
  M.write(path)
  vim.cmd('qall!')
end

return M
