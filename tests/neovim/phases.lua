-- The phase protocol the headless Neovim sides of tests/neovim/run.sh
-- share (test_plugin.lua, test_core.lua): checks collected per phase,
-- written atomically to $QCNV_TMP/<prefix><phase>.json, and the go files
-- run.sh creates ($QCNV_TMP/go-<name>, with the same prefix) to let the
-- next phase run.
--
--   local P = dofile(here .. '/phases.lua')(T, 'nv-core-', 'go-core-')
--   P.check(name, ok, detail); P.emit(phase, data); P.go(name) -> predicate

local uv = vim.uv or vim.loop

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

  function P.read(path)
    local f = io.open(path, 'rb')
    if not f then
      return nil
    end
    local s = f:read('*a')
    f:close()
    return s
  end

  function P.write(path, text)
    local f = assert(io.open(path, 'wb'))
    f:write(text)
    f:close()
  end

  return P
end
