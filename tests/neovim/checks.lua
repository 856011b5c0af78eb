-- The checks a Lua test file of tests/neovim reports to run.sh, which prints
-- and counts them (report_checks): {"checks": [[name, ok, detail], ...]}.
--   local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
--   C.check(name, ok, detail)   detail is kept (vim.inspect) only when not ok
--   C.finish(path)              writes the file and quits Neovim (C.write: only writes)
--   C.read(path)                a file's bytes, or nil when it cannot be read
--   C.write_file(path, text)    writes the bytes, making the folder first
--   C.end_job(job)              ends a terminal job's program (SIGTERM), jobstop only if it stays
--   C.run_guarded(run, name)    runs run(); a Lua error fails the check `name`; then stops the plugin
local M = { list = {} }

function M.check(name, ok, detail)
  M.list[#M.list + 1] = { name, ok and true or false, (not ok and detail ~= nil) and vim.inspect(detail) or '' }
end

function M.write(path)
  local f = assert(io.open(path, 'w'))
  f:write(vim.fn.json_encode({ checks = M.list }))
  f:close()
end

function M.read(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local s = f:read('*a')
  f:close()
  return s
end

function M.write_file(path, text)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ':h'), 'p')
  local f = assert(io.open(path, 'wb'))
  f:write(text)
  f:close()
end

-- Ends a terminal job the way a CLI ends by itself: SIGTERM to its process,
-- then Neovim sees the program exit and closes the pty. jobstop closes the pty
-- first, and once, on a CI machine, Neovim 0.7.2 caught SIGHUP right after
-- such a jobstop and hung in its exit. jobstop stays the fallback (5 s).
function M.end_job(job)
  local ok, pid = pcall(vim.fn.jobpid, job)
  if ok and type(pid) == 'number' and pid > 0 then
    pcall((vim.uv or vim.loop).kill, pid, 15)
    if vim.fn.jobwait({ job }, 5000)[1] ~= -1 then
      return
    end
  end
  pcall(vim.fn.jobstop, job)
end

function M.run_guarded(run, name)
  local ok, err = xpcall(run, debug.traceback)
  M.check(name, ok, err)
  pcall(function()
    require('qwen_companion').stop({ silent = true })
  end)
end

function M.finish(path)
  M.write(path)
  vim.cmd('qall!')
end

return M
