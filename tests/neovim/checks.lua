-- The checks a Lua test file of tests/neovim reports to run.sh, which prints
-- and counts them (report_checks): {"checks": [[name, ok, detail], ...]}.
--   local C = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua')
--   C.check(name, ok, detail)   detail is kept (vim.inspect) only when not ok
--   C.finish(path)              writes the file and quits Neovim (C.write: only writes)
--   C.read(path)                a file's bytes, or nil when it cannot be read
--   C.write_file(path, text)    writes the bytes, making the folder first
--   C.end_job(job)              jobstop once the terminal job's program runs (not before its exec)
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

-- Stops a terminal job once its program runs. Neovim forks the pty child
-- with its own signal handlers, whose pipe the child shares until it execs:
-- a signal that reaches the child in that window (jobstop's SIGHUP when it
-- closes the pty, or a SIGTERM) arrives in the editor as if sent to it, and
-- Neovim 0.7.2 then says "Caught deadly signal" and hangs in its exit (seen
-- in CI, with a job stopped right after :QwenRun started it). So this waits
-- (5 s at most) until /proc/<pid>/exe is no longer Neovim's, then jobstop.
function M.end_job(job)
  local uv = vim.uv or vim.loop
  local ok, pid = pcall(vim.fn.jobpid, job)
  if ok and type(pid) == 'number' and pid > 0 then
    local self_exe = uv.exepath()
    vim.wait(5000, function()
      local exe = uv.fs_readlink('/proc/' .. pid .. '/exe')
      return exe == nil or exe ~= self_exe
    end, 10)
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
