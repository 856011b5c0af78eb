-- qwen_companion.notify: vim.notify with the plugin's prefix, usable from
-- any context (scheduled onto the main loop when called in a fast one, where
-- vim.notify may not run).

return function(msg, level)
  local function go()
    vim.notify('qwen-companion: ' .. msg, level or vim.log.levels.INFO)
  end
  if vim.in_fast_event() then
    vim.schedule(go)
  else
    go()
  end
end
