-- qwen_companion.statusline: the text of require('qwen_companion').statusline()
-- from statusline_data()'s facts.

local M = {}

--- '' when not running, else e.g. `Qwen: 2 CLIs`, `Qwen: 1 CLI, 1 diff`,
--- `Qwen: no CLI, error: <first 40 characters>`.
function M.format(d)
  if not d.running then
    return ''
  end
  local n = d.clients
  local parts = { n == nil and '? CLIs' or n == 0 and 'no CLI' or n == 1 and '1 CLI' or (n .. ' CLIs') }
  if d.diffs > 0 then
    parts[#parts + 1] = d.diffs == 1 and '1 diff' or (d.diffs .. ' diffs')
  end
  if d.error then
    local e = tostring(d.error):gsub('%s+', ' ')
    if vim.fn.strchars(e) > 40 then
      e = vim.fn.strcharpart(e, 0, 39) .. '…'
    end
    parts[#parts + 1] = 'error: ' .. e
  end
  return 'Qwen: ' .. table.concat(parts, ', ')
end

return M
