-- The phase protocol the headless Neovim sides of tests/neovim/run.sh
-- share (test_plugin.lua, test_core.lua): checks collected per phase,
-- written atomically to $QCNV_TMP/<prefix><phase>.json, and the go files
-- run.sh creates ($QCNV_TMP/go-<name>, with the same prefix) to let the
-- next phase run.
--
--   local P = dofile(here .. '/phases.lua')(T, 'nv-core-', 'go-core-')
--   P.check(name, ok, detail); P.emit(phase, data); P.go(name) -> predicate
--   P.run(steps, timeout_ms, error_path); P.count_lib_calls(capi, counts)

local uv = vim.uv or vim.loop
-- One reader of a file's bytes for every test file (checks.lua).
local read_file = dofile(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h') .. '/checks.lua').read

return function(dir, emit_prefix, go_prefix)
  local P = { pending = {} }

  function P.check(name, ok, detail)
    P.pending[#P.pending + 1] = { name, ok and true or false, detail ~= nil and vim.inspect(detail) or '' }
  end

  function P.write_json(path, data)
    local f = assert(io.open(path .. '.tmp', 'w'))
    f:write(vim.fn.json_encode(data))
    f:close()
    assert(os.rename(path .. '.tmp', path))
  end

  -- Writes the phase's file with the checks gathered since the last one.
  function P.emit(phase, data)
    data = data or {}
    data.checks = P.pending
    P.pending = {}
    P.write_json(dir .. '/' .. emit_prefix .. phase .. '.json', data)
  end

  function P.exists(path)
    return uv.fs_stat(path) ~= nil
  end

  function P.go(name)
    return function()
      return P.exists(dir .. '/' .. go_prefix .. name)
    end
  end

  P.read = read_file

  function P.write(path, text)
    local f = assert(io.open(path, 'wb'))
    f:write(text)
    f:close()
  end

  -- Makes capi.load return the library behind a namespace that counts, in
  -- `counts`, every function looked up through it (capi.call does
  -- lib[name](...)), so a test can tell which library functions ran.
  function P.count_lib_calls(capi, counts)
    local real_load = capi.load
    capi.load = function(path)
      local real, lerr = real_load(path)
      if not real then
        return real, lerr
      end
      return setmetatable({}, {
        __index = function(_, name)
          counts[name] = (counts[name] or 0) + 1
          return real[name]
        end,
      })
    end
  end

  -- Runs `steps` ({name, run, wait?}), one per main-loop turn, each
  -- step's wait polled every 20 ms for at most `timeout_ms`; then quits.
  -- A failure writes {checks} to `error_path` (run.sh's phase() stops on
  -- it) and quits with status 1.
  function P.run(steps, timeout_ms, error_path)
    local i, waited = 0, 0
    local function fail_and_quit(msg)
      P.check(msg, false)
      P.write_json(error_path, { checks = P.pending })
      vim.cmd('cquit 1')
    end
    local function advance()
      local s = steps[i]
      if s and s.wait then
        local ok, done = pcall(s.wait)
        if not ok then
          return fail_and_quit('step "' .. s.name .. '" wait: ' .. tostring(done))
        end
        if not done then
          waited = waited + 20
          if waited > timeout_ms then
            return fail_and_quit('step "' .. s.name .. '" timed out')
          end
          return vim.defer_fn(advance, 20)
        end
      end
      i, waited = i + 1, 0
      s = steps[i]
      if not s then
        vim.cmd('qall!')
        return
      end
      local ok, err = pcall(s.run)
      if not ok then
        return fail_and_quit('step "' .. s.name .. '": ' .. tostring(err))
      end
      vim.defer_fn(advance, 20)
    end
    vim.defer_fn(advance, 0)
  end

  return P
end
