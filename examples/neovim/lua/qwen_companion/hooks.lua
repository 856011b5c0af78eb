-- qwen_companion.hooks: what other modules hook into the core with
-- (qwen_companion.on_start / on_stop / add_terminal_env): the registered
-- functions, in registration order, each with its remover. The core calls
-- them; a failing one is reported, and the others still run.

local M = {}

local lists = { start = {}, stop = {}, env = {} }

--- Registers `fn` under `kind` ('start', 'stop' or 'env'); returns a
--- function that removes it.
function M.add(kind, fn, what)
  assert(type(fn) == 'function', 'qwen_companion.' .. what .. '(fn): fn must be a function')
  local entry = { fn = fn }
  table.insert(lists[kind], entry)
  return function()
    for i, e in ipairs(lists[kind]) do
      if e == entry then
        table.remove(lists[kind], i)
        return
      end
    end
  end
end

--- Calls every `kind` function with `arg()` (computed per call); returns
--- the results of those that succeeded and the errors of the others.
function M.run(kind, arg)
  local results, errors = {}, {}
  for _, e in ipairs(vim.list_slice(lists[kind], 1, #lists[kind])) do
    local ok, res = pcall(e.fn, arg and arg() or nil)
    if ok then
      results[#results + 1] = res
    else
      errors[#errors + 1] = res
    end
  end
  return results, errors
end

return M
