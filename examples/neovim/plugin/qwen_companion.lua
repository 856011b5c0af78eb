-- Qwen Code IDE companion for Neovim (LuaJIT FFI over libqwen_companion).
-- Commands only; the module loads on first use. See examples/neovim/README.md.

if vim.g.loaded_qwen_companion == 1 then
  return
end
vim.g.loaded_qwen_companion = 1

local function qc()
  return require('qwen_companion')
end

local function report(ok, err)
  if not ok then
    vim.notify('qwen-companion: ' .. tostring(err), vim.log.levels.ERROR)
  end
end

vim.api.nvim_create_user_command('QwenCompanionStart', function()
  local ok, err = qc().start()
  report(ok, err)
  if ok then
    local s = qc().status()
    vim.notify(string.format('qwen-companion: listening on 127.0.0.1:%d (%s)', s.port, s.root))
  end
end, { desc = 'Start the Qwen Code IDE companion for the current directory' })

vim.api.nvim_create_user_command('QwenCompanionStop', function()
  report(qc().stop())
end, { desc = 'Stop the Qwen Code IDE companion' })

vim.api.nvim_create_user_command('QwenCompanionStatus', function()
  local s = package.loaded['qwen_companion'] and qc().status()
  vim.notify('qwen-companion: ' .. (s and vim.inspect(s) or 'not running'))
end, { desc = 'Show the Qwen Code IDE companion state' })

vim.api.nvim_create_user_command('QwenDiffAccept', function(a)
  report(qc().accept(a.args))
end, { nargs = '?', complete = 'file', desc = "Accept Qwen Code's proposed diff (with your edits)" })

vim.api.nvim_create_user_command('QwenDiffReject', function(a)
  report(qc().reject(a.args))
end, { nargs = '?', complete = 'file', desc = "Reject Qwen Code's proposed diff" })

vim.api.nvim_create_autocmd('VimEnter', {
  group = vim.api.nvim_create_augroup('QwenCompanionAutostart', { clear = true }),
  once = true,
  callback = function()
    local m = package.loaded['qwen_companion']
    local auto = (m and m.config.autostart) or vim.g.qwen_companion_autostart == 1 or vim.g.qwen_companion_autostart == true
    if auto and not (m and m.status()) then
      report(qc().start())
    end
  end,
})
