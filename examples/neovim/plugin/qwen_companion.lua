-- Qwen Code IDE companion for Neovim (LuaJIT FFI over libqwen_companion).
-- Commands only (all named :Qwen*); the module loads on first use.
-- See :help qwen_companion and examples/neovim/README.md.

if vim.g.loaded_qwen_companion == 1 then
  return
end
vim.g.loaded_qwen_companion = 1

require('qwen_companion.commands').define()

vim.api.nvim_create_autocmd('VimEnter', {
  group = vim.api.nvim_create_augroup('QwenCompanionAutostart', { clear = true }),
  once = true,
  callback = function()
    local m = package.loaded['qwen_companion']
    local auto = (m and m.config.autostart) or vim.g.qwen_companion_autostart == 1 or vim.g.qwen_companion_autostart == true
    if auto and not (m and m.status()) then
      local ok, err = require('qwen_companion').start()
      if not ok then
        vim.notify('qwen-companion: ' .. tostring(err), vim.log.levels.ERROR)
      end
    end
  end,
})
